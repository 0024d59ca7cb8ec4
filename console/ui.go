package console

import (
	"embed"
	"io/fs"
)

// uiFiles holds the files of the console's page: HTML, a script, a style
// sheet and an icon, embedded so that the console needs no build step, no
// CDN and no network. The script puts every value it gets from the server
// in the page as text, never as HTML, and needs nothing the console's
// Content-Security-Policy refuses (no inline script or style, no eval,
// nothing from elsewhere).
//
//go:embed ui/index.html ui/console.js ui/console.css ui/favicon.svg
var uiFiles embed.FS

// pageFiles are the page's files, served at the console's root:
// index.html at "/", the others by name.
var pageFiles = mustSub(uiFiles, "ui")

// mustSub is fs.Sub of a directory that is embedded, which cannot fail.
func mustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err)
	}
	return sub
}
