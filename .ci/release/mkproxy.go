// Command mkproxy writes a file-based Go module proxy holding this
// repository's modules at one version, made from a directory of the
// repository's files (an export of a commit, so that only tracked files go
// into the modules):
//
//	go run . -src DIR -version v0.1.0 -out PROXYDIR
//
// Every directory of DIR with a go.mod is a module; its path is read from
// the go.mod. A consumer then resolves them with
// GOPROXY=file://PROXYDIR, with no network and no replace directive.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

func main() {
	src := flag.String("src", "", "directory holding the repository's files")
	version := flag.String("version", "", "the version to publish every module at")
	out := flag.String("out", "", "directory of the file-based proxy to write")
	flag.Parse()
	if *src == "" || *version == "" || *out == "" {
		log.Fatal("mkproxy: -src, -version and -out are required")
	}
	var mods []string
	err := filepath.WalkDir(*src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "go.mod" && !skipped(*src, path) {
			mods = append(mods, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, dir := range mods {
		path, err := publish(dir, *version, *out)
		if err != nil {
			log.Fatalf("mkproxy: %s: %v", dir, err)
		}
		fmt.Printf("mkproxy: %s@%s\n", path, *version)
	}
}

// skipped reports a go.mod that is not one of the published modules: the
// CI tools' own (under .ci) and test data.
func skipped(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return true
	}
	rel = filepath.ToSlash(rel)
	return strings.HasPrefix(rel, ".ci/") || strings.Contains("/"+rel, "/testdata/")
}

// publish writes the .info, .mod and .zip of the module in dir.
func publish(dir, version, out string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	path := modfile.ModulePath(data)
	if path == "" {
		return "", fmt.Errorf("no module path in go.mod")
	}
	escaped, err := module.EscapePath(path)
	if err != nil {
		return "", err
	}
	at := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return "", err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(at, version+".info"), info, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(at, version+".mod"), data, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(at, "list"), []byte(version+"\n"), 0o644); err != nil {
		return "", err
	}
	f, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		return "", err
	}
	if err := zip.CreateFromDir(f, module.Version{Path: path, Version: version}, dir); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}
