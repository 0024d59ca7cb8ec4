// Package jsonscan checks a JSON document in one pass, in time linear in
// its size, before it is decoded: arrays longer than their limit, nesting
// deeper than a limit, and strings holding invalid UTF-8 or control
// characters; and decodes it strictly (Decode), naming the member each
// problem is about. The lifecycle's HTTP layer runs it on every request
// body, so that no body makes decoding or validation do more work than its
// size allows, and one answer lists every invalid member.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits are the limits a scan enforces.
type Limits struct {
	// MaxDepth is how deeply objects and arrays may nest.
	MaxDepth int
	// MaxArray bounds every array that Arrays does not name.
	MaxArray int
	// Arrays are the most entries of named arrays, by JSON path without
	// indices ("pullRequest.reviewers", "filters.taskIds").
	Arrays map[string]int
	// MinArray is the smallest limit of Arrays and MaxArray: arrays
	// shorter than that need no lookup.
	MinArray int
}

// Scan checks raw. It reports each array over its limit and nesting deeper
// than MaxDepth (hard problems: the scan stops and Scan returns true), and
// each string value holding invalid UTF-8 (raw, or as unpaired surrogate
// escapes) or control characters other than tab and newline (the first
// problem of each string; the scan goes on, so that one answer lists every
// problem). A problem is reported with the path of its value, as
// "pullRequest.reviewers[3]", or "body" for the whole document. Malformed
// JSON stops the scan without a report; the decoder says what is wrong.
func Scan(raw []byte, limits *Limits, report func(path, reason string)) (hard bool) {
	s := scanner{raw: raw, limits: limits, report: report}
	s.skipSpace()
	if s.pos < len(s.raw) {
		s.value()
	}
	return s.hard
}

// Decode decodes one JSON value from raw into dst, refusing unknown
// members and trailing data, and reports each problem as Scan does. It
// first scans raw: after a hard problem of the scan nothing is decoded.
// It returns typeOnly when every problem reported leaves the rest of dst
// decoded, so that it can still be checked: the scan's problems with
// strings, and members of the wrong JSON type. A problem that stops the
// decoding (malformed JSON, an unknown member, trailing data) is reported
// alone.
func Decode(raw []byte, dst any, limits *Limits, report func(path, reason string)) (typeOnly bool) {
	var scanned []string // path, reason pairs
	if Scan(raw, limits, func(path, reason string) { scanned = append(scanned, path, reason) }) {
		replay(scanned, report)
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		path, reason, typeErr := decodeProblem(err)
		if !typeErr {
			report(path, reason)
			return false
		}
		replay(scanned, report)
		for i := 0; i < len(scanned); i += 2 {
			if scanned[i] == path {
				return true // one problem a member
			}
		}
		report(path, reason)
		return true
	}
	if _, err := dec.Token(); err != io.EOF {
		report("body", "must hold exactly one JSON object")
		return false
	}
	replay(scanned, report)
	return true
}

// replay reports the path, reason pairs of problems.
func replay(problems []string, report func(path, reason string)) {
	for i := 0; i < len(problems); i += 2 {
		report(problems[i], problems[i+1])
	}
}

// decodeProblem names the member an encoding/json error is about and says
// what is wrong with it; typeErr says the member had the wrong JSON type,
// which leaves the rest decoded.
func decodeProblem(err error) (path, reason string, typeErr bool) {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return "body", "is not valid JSON", false
	case errors.As(err, &typ):
		if typ.Field == "" {
			return "body", "must be a JSON object", false
		}
		return typ.Field, "must be " + jsonKind(typ.Type.Kind().String()), true
	}
	const unknown = "json: unknown field "
	if msg := err.Error(); strings.HasPrefix(msg, unknown) {
		name, _ := strconv.Unquote(strings.TrimPrefix(msg, unknown))
		return name, "is not a known member", false
	}
	return "body", err.Error(), false
}

// jsonKind names a Go kind as the JSON type a client must send.
func jsonKind(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "struct", "map", "ptr":
		return "an object"
	case "int", "int64", "int32", "uint", "uint64", "float64", "float32":
		return "a number"
	}
	return "of another type"
}

// scanner is the state of Scan: a recursive descent over the JSON value,
// keeping only the path to the current value.
type scanner struct {
	raw    []byte
	pos    int
	stack  []frame
	limits *Limits
	report func(path, reason string)
	hard   bool // an array or depth limit was exceeded: stop
}

// frame is one open object or array on the path to the current value.
type frame struct {
	array bool
	key   []byte // objects: the raw key of the current member
	index int    // arrays: the index of the current element
}

// value scans the value at pos. It returns false when the scan must stop:
// malformed JSON or a hard error.
func (s *scanner) value() bool {
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

// push opens an object or array, refusing to go deeper than MaxDepth.
func (s *scanner) push(f frame) bool {
	if len(s.stack) >= s.limits.MaxDepth {
		s.report("body", fmt.Sprintf("nests objects and arrays more than %d levels deep", s.limits.MaxDepth))
		s.hard = true
		return false
	}
	s.stack = append(s.stack, f)
	s.pos++ // the opening bracket
	return true
}

func (s *scanner) object() bool {
	if !s.push(frame{}) {
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

func (s *scanner) array() bool {
	if !s.push(frame{array: true}) {
		return false
	}
	top := len(s.stack) - 1
	s.skipSpace()
	if s.peek() == ']' {
		s.pos++
		s.stack = s.stack[:top]
		return true
	}
	limit := 0 // looked up once the array is longer than MinArray
	for i := 0; ; i++ {
		s.stack[top].index = i
		if i >= s.limits.MinArray {
			if limit == 0 {
				limit = s.arrayLimit(top)
			}
			if i >= limit {
				s.report(s.path(top), fmt.Sprintf("at most %d entries", limit))
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
func (s *scanner) str(check bool) bool {
	s.pos++ // the opening quote
	reported := !check
	report := func(reason string) {
		if !reported {
			reported = true
			s.report(s.path(len(s.stack)), reason)
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
				case ForbiddenControl(r):
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
			} else if ForbiddenControl(r) {
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

// ForbiddenControl reports whether r is a control character that text
// members may not hold: any but tab and newline (C0, DEL and C1).
func ForbiddenControl(r rune) bool {
	return (r < 0x20 && r != '\t' && r != '\n') || (r >= 0x7f && r <= 0x9f)
}

func utf8HighSurrogate(r rune) bool { return r >= 0xd800 && r <= 0xdbff }
func utf8LowSurrogate(r rune) bool  { return r >= 0xdc00 && r <= 0xdfff }

// hex4 reads the four hex digits of a \u escape.
func (s *scanner) hex4() (rune, bool) {
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

func (s *scanner) peek() byte {
	if s.pos < len(s.raw) {
		return s.raw[s.pos]
	}
	return 0
}

func (s *scanner) skipSpace() {
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
func (s *scanner) path(n int) string {
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
// entry in Arrays, or MaxArray.
func (s *scanner) arrayLimit(top int) int {
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
	if n, ok := s.limits.Arrays[b.String()]; ok {
		return n
	}
	return s.limits.MaxArray
}
