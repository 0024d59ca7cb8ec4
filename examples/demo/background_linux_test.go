package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitExit waits until the process pid, not a child of this one, has
// exited, or timeout has passed: a pidfd becomes readable when its process
// exits.
func waitExit(t *testing.T, pid int, timeout time.Duration) {
	t.Helper()
	const sysPidfdOpen = 434
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno == syscall.ESRCH {
		return // gone already
	}
	if errno != 0 {
		t.Errorf("pidfd_open(%d): %v", pid, errno)
		return
	}
	defer syscall.Close(int(fd))
	deadline := time.Now().Add(timeout)
	for {
		var set syscall.FdSet
		set.Bits[fd/64] |= 1 << (fd % 64)
		tv := syscall.NsecToTimeval(time.Until(deadline).Nanoseconds())
		n, err := syscall.Select(int(fd)+1, &set, nil, nil, &tv)
		switch {
		case errors.Is(err, syscall.EINTR) && time.Now().Before(deadline):
			continue
		case err != nil:
			t.Errorf("wait for process %d: %v", pid, err)
		case n == 0:
			t.Errorf("process %d still ran %s after SIGTERM; killed", pid, timeout)
			const sysPidfdSendSignal = 424
			syscall.Syscall6(sysPidfdSendSignal, fd, uintptr(syscall.SIGKILL), 0, 0, 0, 0)
		}
		return
	}
}

// With -background, the admin key goes to the shell commands printed for
// eval and to the key file, never to demo.log; the log, the pid file, the
// database and the directory are the owner's only.
func TestBackgroundKeepsTheKeyOutOfTheLog(t *testing.T) {
	dir := t.TempDir()
	var out, msg bytes.Buffer
	err := run(context.Background(), []string{"-background", "-addr", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0", "-data", dir}, &out, &msg)
	if err != nil {
		t.Fatalf("run -background: %v (%s)", err, msg.String())
	}
	readPID := func() (int, error) {
		pidText, err := os.ReadFile(filepath.Join(dir, "demo.pid"))
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(strings.TrimSpace(string(pidText)))
	}
	// Registered as soon as the demo runs, so that it is stopped however
	// the test ends; runs before t.TempDir's removal: the server is gone
	// by then.
	t.Cleanup(func() {
		pid, err := readPID()
		if err != nil {
			t.Errorf("the background demo cannot be stopped: its pid: %v", err)
			return
		}
		syscall.Kill(pid, syscall.SIGTERM)
		waitExit(t, pid, 20*time.Second)
	})
	if _, err := readPID(); err != nil {
		t.Fatal(err)
	}
	keyText, err := os.ReadFile(filepath.Join(dir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(keyText))
	if !apiKeyForm.MatchString(key) {
		t.Fatalf("admin.key holds %q, not a key", key)
	}
	if !strings.HasPrefix(out.String(), "export KEY="+key+" BASE=http://127.0.0.1:") {
		t.Errorf("printed for eval: %q, want the export of the key and the base URL", out.String())
	}
	logged, err := os.ReadFile(filepath.Join(dir, "demo.log"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(logged), key) {
		t.Errorf("demo.log holds the admin key:\n%s", logged)
	}
	if !strings.Contains(string(logged), "lifecycle demo listening on") {
		t.Errorf("demo.log does not hold the server's output:\n%s", logged)
	}
	if strings.Contains(msg.String(), key) {
		t.Errorf("the message on stderr holds the admin key: %s", msg.String())
	}
	names := checkPrivate(t, dir)
	for _, want := range []string{"demo.log", "demo.pid", "lifecycle.db", "admin.key"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s in the data directory (files: %v)", want, names)
		}
	}
}
