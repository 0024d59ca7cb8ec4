// Package consoleui holds the files of the operator console's page
// (package console): HTML, a script, a style sheet and an icon,
// embedded so that the console needs no build step, no CDN and no network.
// The script puts every value it gets from the server in the page as text,
// never as HTML, and needs nothing the console's Content-Security-Policy
// refuses (no inline script or style, no eval, nothing from elsewhere).
package consoleui

import "embed"

// Files are the page's files, served at the console's root: index.html at
// "/", the others by name.
//
//go:embed index.html console.js console.css favicon.svg
var Files embed.FS
