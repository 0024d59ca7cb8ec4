package sse

import (
	"bytes"
	"encoding/json"
)

// AppendJSON appends v to dst as a json.Encoder without HTML escaping
// writes it, minus the newline: compact, on the one line of a frame's data
// field. On error it returns dst as it was.
func AppendJSON(dst []byte, v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return dst, err
	}
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...), nil
}

// PlainString reports whether s encodes as a JSON string by itself
// between quotes: printable ASCII without quote or backslash. A frame's
// data may then carry it without an encoder.
func PlainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// CompactObject reports whether b, taken to be JSON, is an object with no
// whitespace outside its strings and no control character inside them,
// which encoding/json would copy unchanged, and which fits on the one line
// of a frame's data field.
func CompactObject(b []byte) bool {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case c < 0x20:
			return false
		case escaped:
			escaped = false
		case inString:
			if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ':
			return false
		}
	}
	return !inString
}
