package lifecycle

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits that hold for every request body, checked in one pass over its
// bytes before it is decoded, so that no body makes decoding or validation
// do more work than its size allows.
const (
	// maxBodyDepth is how deeply a body may nest objects and arrays; no
	// request of the API needs more than four levels.
	maxBodyDepth = 32
	// maxArrayEntries bounds every array of a request body that
	// arrayLimits does not name: no array of the API takes more.
	maxArrayEntries = 100
	// maxEventTypeEntries bounds the eventTypes of a subscription: there
	// are four event types.
	maxEventTypeEntries = 4
)

// arrayLimits are the most entries of the arrays of request bodies, by
// JSON path without indices; the validation of each request checks the
// same limits, with the same words, on what it decodes.
var arrayLimits = map[string]int{
	"checks":                maxChecks,
	"pullRequest.reviewers": maxReviewers,
	"labels":                maxLabels,
	"acceptanceCriteria":    maxCriteria,
	"eventTypes":            maxEventTypeEntries,
	"filters.taskIds":       maxFilterEntries,
	"filters.projects":      maxFilterEntries,
	"scopes":                len(allScopes),
}

// minArrayLimit is the smallest limit of arrayLimits: arrays shorter than
// that need no lookup.
const minArrayLimit = maxEventTypeEntries

// scanBody checks a request body in one pass, in time linear in its size:
// it refuses arrays longer than their limit and nesting deeper than
// maxBodyDepth (hard errors: the body is not decoded), and strings holding
// invalid UTF-8 (raw, or as unpaired surrogate escapes) or control
// characters other than tab and newline (soft errors: the body can still be
// decoded and checked, so that one answer lists every problem). Malformed
// JSON stops the scan without an error; the decoder reports it.
func scanBody(raw []byte) (fields *ValidationError, hard bool) {
	s := bodyScanner{raw: raw}
	s.skipSpace()
	if s.pos < len(s.raw) {
		s.value()
	}
	if len(s.v.fields) == 0 {
		return nil, false
	}
	return &ValidationError{Fields: s.v.fields, Truncated: s.v.truncated}, s.hard
}

// bodyScanner is the state of scanBody: a recursive descent over the JSON
// value, keeping only the path to the current value.
type bodyScanner struct {
	raw   []byte
	pos   int
	stack []scanFrame
	v     validator
	hard  bool // an array or depth limit was exceeded: stop
}

// scanFrame is one open object or array on the path to the current value.
type scanFrame struct {
	array bool
	key   []byte // objects: the raw key of the current member
	index int    // arrays: the index of the current element
}

// value scans the value at pos. It returns false when the scan must stop:
// malformed JSON or a hard error.
func (s *bodyScanner) value() bool {
	switch s.raw[s.pos] {
	case '{':
		return s.object()
	case '[':
		return s.array()
	case '"':
		return s.str(true)
	}
	// A number or a literal: the decoder checks it.
	for s.pos < len(s.raw) && !strings.ContainsRune(",]} \t\r\n", rune(s.raw[s.pos])) {
		s.pos++
	}
	return true
}

// push opens an object or array, refusing to go deeper than maxBodyDepth.
func (s *bodyScanner) push(f scanFrame) bool {
	if len(s.stack) >= maxBodyDepth {
		s.v.add("body", fmt.Sprintf("nests objects and arrays more than %d levels deep", maxBodyDepth))
		s.hard = true
		return false
	}
	s.stack = append(s.stack, f)
	s.pos++ // the opening bracket
	return true
}

func (s *bodyScanner) object() bool {
	if !s.push(scanFrame{}) {
		return false
	}
	s.skipSpace()
	if s.peek() == '}' {
		s.pos++
		s.stack = s.stack[:len(s.stack)-1]
		return true
	}
	for {
		if s.peek() != '"' {
			return false
		}
		start := s.pos + 1
		if !s.str(false) {
			return false
		}
		s.stack[len(s.stack)-1].key = s.raw[start : s.pos-1]
		s.skipSpace()
		if s.peek() != ':' {
			return false
		}
		s.pos++
		s.skipSpace()
		if s.pos >= len(s.raw) || !s.value() {
			return false
		}
		s.skipSpace()
		switch s.peek() {
		case ',':
			s.pos++
			s.skipSpace()
		case '}':
			s.pos++
			s.stack = s.stack[:len(s.stack)-1]
			return true
		default:
			return false
		}
	}
}

func (s *bodyScanner) array() bool {
	if !s.push(scanFrame{array: true}) {
		return false
	}
	top := len(s.stack) - 1
	s.skipSpace()
	if s.peek() == ']' {
		s.pos++
		s.stack = s.stack[:top]
		return true
	}
	limit := 0 // looked up once the array is longer than minArrayLimit
	for i := 0; ; i++ {
		s.stack[top].index = i
		if i >= minArrayLimit {
			if limit == 0 {
				limit = s.arrayLimit(top)
			}
			if i >= limit {
				s.v.add(s.path(top), fmt.Sprintf("at most %d entries", limit))
				s.hard = true
				return false
			}
		}
		if s.pos >= len(s.raw) || !s.value() {
			return false
		}
		s.skipSpace()
		switch s.peek() {
		case ',':
			s.pos++
			s.skipSpace()
		case ']':
			s.pos++
			s.stack = s.stack[:top]
			return true
		default:
			return false
		}
	}
}

// str scans the string at pos. A value (not a key) is checked: the first
// problem found is recorded against its path.
func (s *bodyScanner) str(check bool) bool {
	s.pos++ // the opening quote
	reported := !check
	report := func(reason string) {
		if !reported {
			reported = true
			s.v.add(s.path(len(s.stack)), reason)
		}
	}
	for s.pos < len(s.raw) {
		c := s.raw[s.pos]
		switch {
		case c == '"':
			s.pos++
			return true
		case c < 0x20:
			return false // malformed: the decoder says so
		case c == '\\':
			if s.pos+1 >= len(s.raw) {
				return false
			}
			e := s.raw[s.pos+1]
			s.pos += 2
			switch e {
			case 'b', 'f', 'r':
				report(reasonControl)
			case 'u':
				r, ok := s.hex4()
				if !ok {
					return false
				}
				switch {
				case utf8HighSurrogate(r):
					if s.pos+1 < len(s.raw) && s.raw[s.pos] == '\\' && s.raw[s.pos+1] == 'u' {
						s.pos += 2
						low, ok := s.hex4()
						if !ok {
							return false
						}
						if !utf8LowSurrogate(low) {
							report(reasonUTF8)
						}
					} else {
						report(reasonUTF8)
					}
				case utf8LowSurrogate(r):
					report(reasonUTF8)
				case forbiddenControl(r):
					report(reasonControl)
				}
			}
		case c < utf8.RuneSelf:
			if c == 0x7f {
				report(reasonControl) // DEL, which JSON lets through unescaped
			}
			s.pos++
		default:
			r, size := utf8.DecodeRune(s.raw[s.pos:])
			if r == utf8.RuneError && size == 1 {
				report(reasonUTF8)
			} else if forbiddenControl(r) {
				report(reasonControl)
			}
			s.pos += size
		}
	}
	return false
}

// Reasons of the text checks.
const (
	reasonControl = "must not hold control characters other than tab and newline"
	reasonUTF8    = "must be valid UTF-8"
)

// forbiddenControl reports whether r is a control character that text
// members may not hold: any but tab and newline (C0, DEL and C1).
func forbiddenControl(r rune) bool {
	return (r < 0x20 && r != '\t' && r != '\n') || (r >= 0x7f && r <= 0x9f)
}

func utf8HighSurrogate(r rune) bool { return r >= 0xd800 && r <= 0xdbff }
func utf8LowSurrogate(r rune) bool  { return r >= 0xdc00 && r <= 0xdfff }

// hex4 reads the four hex digits of a \u escape.
func (s *bodyScanner) hex4() (rune, bool) {
	if s.pos+4 > len(s.raw) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(s.raw[s.pos:s.pos+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	s.pos += 4
	return rune(n), true
}

func (s *bodyScanner) peek() byte {
	if s.pos < len(s.raw) {
		return s.raw[s.pos]
	}
	return 0
}

func (s *bodyScanner) skipSpace() {
	for s.pos < len(s.raw) {
		switch s.raw[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		default:
			return
		}
	}
}

// path names the value inside the first n open frames, as field errors
// name members: "pullRequest.reviewers[3]"; "body" for the whole body.
func (s *bodyScanner) path(n int) string {
	var b strings.Builder
	for _, f := range s.stack[:n] {
		if f.array {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(f.index))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(f.key)
	}
	if b.Len() == 0 {
		return "body"
	}
	return b.String()
}

// arrayLimit returns the limit of the array opened by frame top: its
// entry in arrayLimits, or maxArrayEntries.
func (s *bodyScanner) arrayLimit(top int) int {
	var b strings.Builder
	for _, f := range s.stack[:top] {
		if f.array {
			b.WriteString("[]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(f.key)
	}
	if n, ok := arrayLimits[b.String()]; ok {
		return n
	}
	return maxArrayEntries
}
