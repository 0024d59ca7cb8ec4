package oteltp

import "strings"

// TraceID returns the trace ID of a W3C traceparent header value
// ("00-<32 hex>-<16 hex>-<2 hex>"), or "" when the value is not valid:
// a version other than 00 may carry more after its flags, version ff is
// invalid, and an all-zero trace or parent ID is invalid.
func TraceID(v string) string {
	v = strings.TrimSpace(v)
	if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return ""
	}
	version, trace, parent, flags := v[:2], v[3:35], v[36:52], v[53:55]
	if version == "ff" || (version == "00" && len(v) != 55) || (len(v) > 55 && v[55] != '-') {
		return ""
	}
	if !isLowerHex(version) || !isLowerHex(trace) || !isLowerHex(parent) || !isLowerHex(flags) {
		return ""
	}
	if strings.Trim(trace, "0") == "" || strings.Trim(parent, "0") == "" {
		return ""
	}
	return trace
}

// isLowerHex reports whether s holds only 0-9 and a-f.
func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
