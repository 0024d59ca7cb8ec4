package lifecycle_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkUnknownPath measures the unauthenticated answer to GET /x/x/...
// by its number of segments: 30,000 is 60 KB, under the demo's 64 KiB
// header limit; 500,000 is about net/http's default 1 MiB. The time per
// segment must stay flat (linear work); before the bound on
// httpapi.MountHint, the 30,000-segment path cost 4.4 s.
func BenchmarkUnknownPath(b *testing.B) {
	e := newBenchEnv(b)
	for _, n := range []int{3000, 30000, 500000} {
		b.Run(fmt.Sprintf("segments=%d", n), func(b *testing.B) {
			req := httptest.NewRequest("GET", strings.Repeat("/x", n), nil)
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				e.h.ServeHTTP(rec, req)
				if rec.Code != http.StatusNotFound {
					b.Fatalf("%d", rec.Code)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/segment")
		})
	}
}
