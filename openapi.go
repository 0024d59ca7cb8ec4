package lifecycle

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openAPIDocument is docs/openapi.yaml, the OpenAPI 3.1 description of the
// API that [Service.Handler] serves.
//
//go:embed docs/openapi.yaml
var openAPIDocument []byte

// OpenAPIDocument returns the OpenAPI 3.1 document (YAML) of the API that
// [Service.Handler] serves; the handler also serves it, without
// authentication, at GET /openapi.yaml. Paths in it are relative to the
// mount point. The returned slice is a copy.
func OpenAPIDocument() []byte {
	return append([]byte(nil), openAPIDocument...)
}

// handleOpenAPI serves GET /openapi.yaml.
func handleOpenAPI(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/yaml")
	h.Set("Content-Length", strconv.Itoa(len(openAPIDocument)))
	h.Set("Cache-Control", "no-cache")
	w.Write(openAPIDocument)
}
