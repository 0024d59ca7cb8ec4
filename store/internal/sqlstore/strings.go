package sqlstore

import (
	"encoding/json"
	"unicode/utf8"
)

// unmarshalStrings decodes a JSON array of strings, as stored by taskArgs,
// into *dst, as json.Unmarshal does. Arrays as json.Marshal writes them of
// strings with nothing escaped are decoded without reflection, into
// substrings of b; anything else goes to json.Unmarshal.
func unmarshalStrings(b string, dst *[]string) error {
	if ss, ok := simpleStrings(b); ok {
		*dst = ss
		return nil
	}
	return json.Unmarshal([]byte(b), dst)
}

// simpleStrings decodes b when it is `[]` or `["a","b",...]` with no
// whitespace and no escape, control character or invalid UTF-8 in the
// strings.
func simpleStrings(b string) ([]string, bool) {
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, false
	}
	if len(b) == 2 {
		return []string{}, true
	}
	n := 0
	for i := 1; i < len(b)-1; {
		if b[i] != '"' {
			return nil, false
		}
		j := i + 1
		for j < len(b) && b[j] != '"' {
			if b[j] < 0x20 || b[j] == '\\' {
				return nil, false
			}
			j++
		}
		if j >= len(b)-1 || !utf8.ValidString(b[i+1:j]) {
			return nil, false
		}
		n++
		i = j + 1
		switch {
		case i == len(b)-1:
		case b[i] == ',' && i+1 < len(b)-1:
			i++
		default:
			return nil, false
		}
	}
	ss := make([]string, 0, n)
	for i := 1; i < len(b)-1; {
		j := i + 1
		for b[j] != '"' {
			j++
		}
		ss = append(ss, b[i+1:j])
		i = j + 2 // past the quote and the comma
	}
	return ss, true
}
