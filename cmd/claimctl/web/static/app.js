// claimctl serve: refreshes the page from /api/page/N and runs the actions.
// Every value from the server is set as text (textContent), never parsed
// as HTML.
"use strict";

(function () {
  const body = document.body;
  const page = body.dataset.page;
  const interval = Math.max(1000, Number(body.dataset.interval) || 5000);
  const canAct = body.dataset.canAct === "1";
  const hasAttempts = body.dataset.attempts === "1";
  const csrf = document.getElementById("csrf").value;
  const SVG = "http://www.w3.org/2000/svg";

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function setText(id, text) {
    const e = document.getElementById(id);
    if (e) e.textContent = String(text);
  }

  function show(id, text, cls) {
    const e = document.getElementById(id);
    if (!e) return;
    e.hidden = !text;
    e.textContent = text || "";
    if (cls !== undefined) e.className = "msg " + cls;
  }

  // fill replaces the rows of table id: one per item, its cells from
  // cells(item), and an action button from action(item) when allowed.
  function fill(id, items, cells, action) {
    const table = document.getElementById(id);
    if (!table) return;
    const tbody = table.tBodies[0];
    const width = table.tHead.rows[0].cells.length;
    const rows = [];
    for (const item of items) {
      const tr = el("tr");
      for (const c of cells(item)) {
        const td = el("td", c.text, c.cls);
        tr.appendChild(td);
      }
      if (canAct && action) {
        const td = el("td", null, "act");
        const a = action(item);
        if (a) {
          const b = el("button", a.label, "small " + (a.cls || ""));
          b.type = "button";
          b.addEventListener("click", a.run);
          td.appendChild(b);
        }
        tr.appendChild(td);
      }
      rows.push(tr);
    }
    if (rows.length === 0) {
      const tr = el("tr", null, "empty");
      const td = el("td", "none");
      td.colSpan = width;
      tr.appendChild(td);
      rows.push(tr);
    }
    tbody.replaceChildren(...rows);
  }

  // confirmAction asks in the page's dialog; it resolves to null when
  // cancelled, else to {reset}.
  function confirmAction(text, label, offerReset) {
    const dlg = document.getElementById("confirm");
    setText("confirm-text", text);
    setText("confirm-ok", label);
    const resetRow = document.getElementById("confirm-reset-row");
    const reset = document.getElementById("confirm-reset");
    resetRow.hidden = !offerReset;
    reset.checked = false;
    return new Promise((resolve) => {
      dlg.addEventListener("close", () => {
        resolve(dlg.returnValue === "ok" ? { reset: offerReset && reset.checked } : null);
      }, { once: true });
      dlg.returnValue = "";
      dlg.showModal();
      document.getElementById("confirm-cancel").focus();
    });
  }

  async function post(url, payload) {
    const res = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      cache: "no-store",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify(payload),
    });
    let data = {};
    try {
      data = await res.json();
    } catch (e) {
      data = { error: res.status + " " + res.statusText };
    }
    if (!res.ok) throw new Error(data.error || res.status + " " + res.statusText);
    return data;
  }

  async function act(text, label, offerReset, url, payload) {
    const answer = await confirmAction(text, label, offerReset);
    if (!answer) return;
    if (offerReset) payload.reset_attempts = answer.reset;
    try {
      const r = await post(url, payload);
      show("status", r.message, "ok");
    } catch (e) {
      show("status", e.message, "error");
    }
    refresh();
  }

  function rowActions(kind, r) {
    if (kind === "parked") {
      return {
        label: "Unpark", run: () => act(
          "Unpark row " + r.id + "? It goes back to pending and workers claim it again.",
          "Unpark", hasAttempts, "/api/page/" + page + "/unpark", { ids: [r.id] }),
      };
    }
    return {
      label: "Run now", run: () => act(
        "Make row " + r.id + " claimable now instead of in " + r.run_in + "?",
        "Run now", false, "/api/page/" + page + "/retry-now", { ids: [r.id] }),
    };
  }

  function leaseAction(l) {
    if (!l.owner || (l.state !== "held" && l.state !== "expired" && l.state !== "locked")) return null;
    return {
      label: "Force release", cls: "danger", run: () => act(
        "Force-release lease " + l.key + " held by " + (l.holder === "-" ? l.owner : l.holder) +
        (l.locked_at && l.locked_at !== "-" ? " since " + l.locked_at : "") + " (fence " + l.fence + ")? " +
        "A live holder keeps working until its next renewal fails: do this only when fences guard its writes or the holder is dead.",
        "Force release", false, "/api/force-release", { key: l.key, owner: l.owner }),
    };
  }

  function drawChart(history) {
    const svg = document.getElementById("chart");
    if (!svg) return;
    // One user unit per CSS pixel, so that text keeps its shape.
    const W = Math.max(200, Math.round(svg.getBoundingClientRect().width) || 800), H = 180, L = 44, R = 10, T = 10, B = 22;
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    const nodes = [];
    const series = [["pending", "pending"], ["processing", "processing"], ["failed", "failed"]];
    let top = 1;
    for (const p of history) for (const [k] of series) top = Math.max(top, p[k]);
    top = niceCeil(top);
    const y = (v) => T + (H - T - B) * (1 - v / top);
    for (const v of [0, top / 2, top]) {
      const line = document.createElementNS(SVG, "line");
      line.setAttribute("x1", L); line.setAttribute("x2", W - R);
      line.setAttribute("y1", y(v)); line.setAttribute("y2", y(v));
      line.setAttribute("class", "grid");
      nodes.push(line);
      const t = document.createElementNS(SVG, "text");
      t.setAttribute("x", L - 6); t.setAttribute("y", y(v) + 4);
      t.setAttribute("text-anchor", "end");
      t.setAttribute("class", "axis");
      t.textContent = String(Math.round(v));
      nodes.push(t);
    }
    if (history.length > 0) {
      const t0 = history[0].t, t1 = history[history.length - 1].t;
      const span = Math.max(t1 - t0, 1);
      const x = (t) => history.length === 1 ? W - R : L + (W - L - R) * (t - t0) / span;
      const last = history[history.length - 1];
      for (const [k, cls] of series) {
        const pl = document.createElementNS(SVG, "polyline");
        pl.setAttribute("points", history.map((p) => x(p.t).toFixed(1) + "," + y(p[k]).toFixed(1)).join(" "));
        pl.setAttribute("class", "series " + cls);
        nodes.push(pl);
        // The latest sample, visible even when it is the only one.
        const dot = document.createElementNS(SVG, "circle");
        dot.setAttribute("cx", x(last.t).toFixed(1)); dot.setAttribute("cy", y(last[k]).toFixed(1));
        dot.setAttribute("r", "3");
        dot.setAttribute("class", "dot " + cls);
        nodes.push(dot);
      }
      const label = document.createElementNS(SVG, "text");
      label.setAttribute("x", W - R); label.setAttribute("y", H - 6);
      label.setAttribute("text-anchor", "end");
      label.setAttribute("class", "axis");
      label.textContent = history.length === 1 ? "1 sample" : history.length + " samples over " + spanText(t1 - t0);
      nodes.push(label);
    }
    svg.replaceChildren(...nodes);
  }

  function niceCeil(v) {
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  function spanText(ms) {
    const s = Math.round(ms / 1000);
    if (s < 120) return s + " s";
    if (s < 7200) return Math.round(s / 60) + " min";
    return (s / 3600).toFixed(1) + " h";
  }

  function render(v) {
    show("error", v.error ? "Last refresh failed: " + v.error : "");
    const updated = document.getElementById("updated");
    if (updated && v.sampled_at) {
      updated.dataset.at = v.sampled_at;
      updated.textContent = "sampled " + new Date(v.sampled_at).toLocaleTimeString();
    }
    if (v.counts) {
      setText("c-pending", v.counts.pending);
      setText("c-processing", v.counts.processing);
      setText("c-done", v.counts.done);
      setText("c-failed", v.counts.failed);
      setText("c-other", v.counts.other);
      setText("c-oldest-pending", v.counts.oldest_pending);
      setText("c-oldest-processing", v.counts.oldest_processing);
      if (v.backlog) {
        setText("b-dirty", v.backlog.dirty);
        setText("b-oldest", v.backlog.oldest_unfolded);
      }
    }
    drawChart(v.history || []);
    scopeLabel = v.scope;
    parkedCount = v.counts ? v.counts.failed : 0;
    if (unparkAll) {
      unparkAll.hidden = parkedCount === 0;
      unparkAll.textContent = "Unpark all " + parkedCount;
    }
    fill("stuck", v.stuck, (r) => [{ text: r.id }, { text: r.token, cls: "mono" }, { text: r.worker, cls: "mono" }, { text: r.attempts }, { text: r.age }]);
    fill("parked", v.parked, (r) => [{ text: r.id }, { text: r.attempts }, { text: r.age }, { text: r.error, cls: "err" }],
      (r) => rowActions("parked", r));
    fill("scheduled", v.scheduled, (r) => [{ text: r.id }, { text: r.attempts }, { text: r.run_in }, { text: r.error, cls: "err" }],
      (r) => rowActions("scheduled", r));
    fill("leases", v.leases, (l) => [{ text: l.key }, { text: l.state, cls: "state " + l.state }, { text: l.holder, cls: "mono" },
      { text: l.fence }, { text: l.locked_at }, { text: l.expires_at }, { text: l.remaining }], leaseAction);
    show("lease-error", v.lease_error || "");
    for (const k of ["stuck", "parked", "scheduled", "leases"]) {
      const note = document.getElementById("more-" + k);
      if (note) note.hidden = !(v.more && v.more[k]);
    }
    renderPause(v.pause);
    body.dataset.loaded = String(Number(body.dataset.loaded || "0") + 1);
  }

  // The page's pause (-pause-table): its state, and the pause or resume
  // button of the page's scope. A pause of the whole table is resumed with
  // claimctl resume -all-scopes, not from a scope's page.
  const pauseState = document.getElementById("pause-state");
  const pauseBtn = document.getElementById("pause");
  const resumeBtn = document.getElementById("resume");
  function renderPause(p) {
    if (!pauseState) return;
    pauseState.hidden = !p;
    if (p) {
      setText("pause-text", (p.whole ? "The whole table is paused" : "Paused") + " since " + p.since + " (" + p.age + " ago)" +
        (p.by ? " by " + p.by : "") + (p.reason ? ": " + p.reason : ""));
    }
    if (pauseBtn) pauseBtn.hidden = !!p;
    if (resumeBtn) resumeBtn.hidden = !p || p.whole;
  }
  if (pauseBtn) {
    pauseBtn.addEventListener("click", () => act(
      "Pause claims of " + (scopeLabel || "the whole table") + "? Claimers with this pause table take no more of its rows; rows already claimed finish.",
      "Pause", false, "/api/page/" + page + "/pause", {}));
  }
  if (resumeBtn) {
    resumeBtn.addEventListener("click", () => act(
      "Resume claims of " + (scopeLabel || "the whole table") + "?",
      "Resume", false, "/api/page/" + page + "/resume", {}));
  }

  // The scope-wide unpark: every parked row of the page's scope, however
  // many the list shows.
  let parkedCount = 0, scopeLabel = "";
  const unparkAll = document.getElementById("unpark-all");
  if (unparkAll) {
    unparkAll.addEventListener("click", () => act(
      "Unpark all " + parkedCount + " parked row(s) of " + (scopeLabel || "the whole table") +
      "? They go back to pending and workers claim them again.",
      "Unpark all", hasAttempts, "/api/page/" + page + "/unpark", { all: true }));
  }

  let timer = null;
  async function refresh() {
    clearTimeout(timer);
    try {
      const res = await fetch("/api/page/" + page, { credentials: "same-origin", cache: "no-store" });
      if (!res.ok) throw new Error(res.status + " " + res.statusText);
      render(await res.json());
    } catch (e) {
      show("error", "Cannot reach the server: " + e.message);
    }
    timer = setTimeout(refresh, interval);
  }

  refresh();
})();
