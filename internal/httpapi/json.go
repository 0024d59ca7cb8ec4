package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// WriteJSON writes v as the JSON body of a response with status: one
// line, without HTML escaping, with Content-Type application/json and
// Content-Length.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	WriteRaw(w, status, EncodeJSON(v))
}

// WriteData writes v as the data member of the body, {"data": v}, the
// envelope of every answer with one resource.
func WriteData[T any](w http.ResponseWriter, status int, v T) {
	WriteJSON(w, status, struct {
		Data T `json:"data"`
	}{v})
}

// EncodeJSON encodes v as one line of JSON without HTML escaping. Values
// built by package lifecycle always encode; should one not, the result
// is an internal error body.
func EncodeJSON(v any) []byte {
	var buf bytes.Buffer
	buf.Grow(1024)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{"error":{"code":"internal","message":"The server failed to encode its response."}}` + "\n")
	}
	return buf.Bytes()
}

// WriteRaw writes an already encoded JSON body.
func WriteRaw(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// NonNil returns s, or an empty slice when s is nil, so it encodes as [].
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
