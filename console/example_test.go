package console_test

import (
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/console"
	"github.com/tasklifecycle/lifecycle/store/memory"
)

// ExampleNew mounts the operator console beside the API; an operator
// opens /console/ in a browser and signs in with an API key.
func ExampleNew() {
	store := memory.New() // a server keeps its tasks in store/sqlite or store/postgres
	defer store.Close()
	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: "https://tasks.example.com/api", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	con, err := console.New(svc, store, console.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer con.Close()

	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", svc.Handler()))
	mux.Handle("/console/", http.StripPrefix("/console", con))
	server := httptest.NewServer(mux)
	defer server.Close()

	resp, err := http.Get(server.URL + "/console/")
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status, resp.Header.Get("Content-Type"), resp.Header.Get("X-Frame-Options"))
	// Output: 200 OK text/html; charset=utf-8 DENY
}
