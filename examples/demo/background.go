package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// childEnv marks the server process that -background starts.
const childEnv = "LIFECYCLE_DEMO_BACKGROUND_CHILD"

// readyFD is the file descriptor on which the background server reports
// that it serves.
const readyFD = 3

// runBackground starts the demo with args as a process of its own, in a
// new session so that it outlives the shell, waits until it serves, and
// prints to stdout the shell commands that export KEY and BASE. The server
// logs to demo.log in the data directory, readable by its owner only; the
// admin key reaches this process through a pipe, and goes to stdout only,
// never to the log.
func runBackground(opts options, args []string, stdout, stderr io.Writer) error {
	if _, err := privateDataDir(opts.data); err != nil {
		return err
	}
	logPath := filepath.Join(opts.data, "demo.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{w} // fd 3 in the child
	detach(cmd)
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("start the background server: %w", err)
	}
	w.Close()
	pid := cmd.Process.Pid

	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		ready <- strings.TrimSpace(line)
	}()
	var line string
	select {
	case line = <-ready:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		return fmt.Errorf("the background server did not start within 2 minutes; see %s", logPath)
	}
	base, key, ok := strings.Cut(line, " ")
	if !ok {
		cmd.Wait()
		logged, _ := os.ReadFile(logPath)
		return errors.New("the background server stopped: " + strings.TrimSpace(lastLine(string(logged))))
	}
	cmd.Process.Release()
	pidPath := filepath.Join(opts.data, "demo.pid")
	if err := os.WriteFile(pidPath, []byte(fmt.Sprintln(pid)), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "lifecycle demo serving %s in the background (pid %d, log %s); stop it with: kill $(cat %s)\n",
		base, pid, logPath, pidPath)
	fmt.Fprintf(stdout, "export KEY=%s BASE=%s\n", key, base)
	return nil
}

// notifyReady tells the process that started this one with -background
// that the server serves, with its base URL and admin key.
func notifyReady(base, key string) error {
	if os.Getenv(childEnv) == "" {
		return nil
	}
	f := os.NewFile(readyFD, "ready")
	defer f.Close()
	_, err := fmt.Fprintf(f, "%s %s\n", base, key)
	return err
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
