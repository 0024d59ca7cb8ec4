package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// screenshot has headless Chromium take a picture of the page in file,
// width×height pixels, into out (PNG).
func screenshot(chromium, dir, file, out string, width, height int) error {
	profile, err := os.MkdirTemp(dir, "chromium-")
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--force-device-scale-factor=1", "--user-data-dir="+profile,
		"--screenshot="+abs, fmt.Sprintf("--window-size=%d,%d", width, height), "file://"+file)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("chromium: %w: %s", err, log.String())
	}
	if info, err := os.Stat(abs); err != nil || info.Size() == 0 {
		return fmt.Errorf("chromium wrote no picture: %s", log.String())
	}
	return nil
}
