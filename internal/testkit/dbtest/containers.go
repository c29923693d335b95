package dbtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Without a DSN in the environment, a server comes from a container that
// the command in ../containers (a module of its own, so that
// testcontainers and the Docker client stay out of claimlock's
// requirements) starts on a Docker engine, once per test binary and
// engine. The command runs until this binary exits and closes its standard
// input; testcontainers' reaper removes the containers should it be killed.

// holds keeps the standard input of every container command open for the
// life of the test binary (a pipe closed by the garbage collector would
// stop the containers).
var holds struct {
	sync.Mutex
	pipes []io.WriteCloser
}

// startContainer starts engine ("postgres" or "mysql") and returns its
// DSN.
func startContainer(engine string) (string, error) {
	if err := dockerReachable(); err != nil {
		return "", err
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("no Docker engine used: cannot locate the containers command")
	}
	cmd := exec.Command("go", "run", ".", engine)
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "containers")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start the containers command: %w", err)
	}
	holds.Lock()
	holds.pipes = append(holds.pipes, stdin)
	holds.Unlock()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		if dsn, ok := strings.CutPrefix(s, engine+"="); ok {
			return dsn, nil
		}
		if why, ok := strings.CutPrefix(s, engine+"!"); ok {
			return "", errors.New(why)
		}
		return "", fmt.Errorf("containers command: %q; %s", s, lastLine(stderr.String()))
	case <-time.After(10 * time.Minute):
		return "", errors.New("containers command: no server within 10 minutes")
	}
}

// dockerReachable is the quick test that keeps machines without a Docker
// engine from building the containers command: DOCKER_HOST, or a socket
// where Docker (rootful or rootless) puts it.
func dockerReachable() error {
	if os.Getenv("DOCKER_HOST") != "" {
		return nil
	}
	candidates := []string{"/var/run/docker.sock"}
	if home, err := os.UserHomeDir(); err == nil {
		candidates = append(candidates, filepath.Join(home, ".docker", "run", "docker.sock"))
	}
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" {
		candidates = append(candidates, filepath.Join(dir, "docker.sock"))
	}
	for _, p := range candidates {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return nil
		}
	}
	return errors.New("no Docker engine: DOCKER_HOST is unset and no docker.sock was found")
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
