//go:build !unix

package main

import "os/exec"

// detach does nothing where sessions do not exist: the background server
// stays attached to the console that started it.
func detach(*exec.Cmd) {}
