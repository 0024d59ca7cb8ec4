// Package consoleui holds the files of the operator console's page
// (lifecycle.Service.Console): HTML, a script and a style sheet, embedded
// so that the console needs no build step, no CDN and no network.
package consoleui

import "embed"

// Files are the page's files, served at the console's root: index.html at
// "/", the others by name.
//
//go:embed index.html console.js console.css
var Files embed.FS
