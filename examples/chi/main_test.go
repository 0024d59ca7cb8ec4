package main

import "testing"

func TestSmoke(t *testing.T) {
	if err := smokeTest(t.Context()); err != nil {
		t.Fatal(err)
	}
}
