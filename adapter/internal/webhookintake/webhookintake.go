// Package webhookintake reads the bodies of code hosts' webhook deliveries
// before they are verified, within bounds that a sender without the
// webhook's secret cannot push: a largest body, refused at once when its
// Content-Length says so; a read deadline, set on the connection through
// [http.ResponseController]; and a budget of bytes held in memory at once
// across the deliveries a [Reader] takes. A body is fed to a hash (a
// signature's HMAC) as it arrives, so that it can be verified before
// anything else reads it.
package webhookintake

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// chunkSize is the unit in which a Reader lends memory: a body is held in
// chunks of this size, taken from the budget as its bytes arrive. Most
// deliveries fit in one.
const chunkSize = 32 << 10

// keptChunks is the most chunks a Reader keeps for reuse once they are
// given back; the others are left to the garbage collector, so that a
// burst does not hold its memory for ever.
const keptChunks = 32

// Errors of [Reader.Read] and [Reader.Discard]; [Refuse] answers each.
var (
	// ErrTooLarge: the body is longer than Config.Max.
	ErrTooLarge = errors.New("the webhook body is larger than the limit")
	// ErrBusy: the budget of bytes in flight is spent.
	ErrBusy = errors.New("too many webhook bodies are being read at once")
	// ErrTimeout: the body did not arrive within Config.Timeout.
	ErrTimeout = errors.New("the webhook body did not arrive within the read timeout")
)

// Config configures a Reader.
type Config struct {
	// Budget is the most bytes of bodies held in memory at once by
	// [Reader.Read], across all its calls; a body that needs more than is
	// left is refused with ErrBusy, and one longer than Budget itself with
	// ErrTooLarge. Memory is lent in 32 KiB chunks (at least one), of
	// which up to 1 MiB is kept for reuse once given back.
	Budget int64
	// Max is the longest body taken.
	Max int64
	// Timeout bounds the reading of a body, from the call of Read or
	// Discard. Zero means none.
	Timeout time.Duration
	// Logger is told once when the ResponseWriter cannot set a read
	// deadline. Nil means slog.Default().
	Logger *slog.Logger
}

// Reader reads webhook bodies within its Config. It is safe for
// concurrent use.
type Reader struct {
	cfg        Config
	noDeadline sync.Once

	mu   sync.Mutex
	free [][]byte // chunks given back, kept for reuse
	lent int      // chunks lent
	max  int      // most chunks lent at once
}

// New returns a Reader.
func New(cfg Config) *Reader {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Reader{cfg: cfg, max: max(1, int(cfg.Budget/chunkSize))}
}

// take lends a chunk, or returns nil when the budget is spent.
func (rd *Reader) take() []byte {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.lent == rd.max {
		return nil
	}
	rd.lent++
	if n := len(rd.free); n > 0 {
		c := rd.free[n-1]
		rd.free[n-1] = nil
		rd.free = rd.free[:n-1]
		return c[:0]
	}
	return make([]byte, 0, chunkSize)
}

// give takes chunks back.
func (rd *Reader) give(chunks [][]byte) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	rd.lent -= len(chunks)
	for _, c := range chunks {
		if len(rd.free) == keptChunks {
			break
		}
		rd.free = append(rd.free, c)
	}
}

// InFlight returns the bytes of memory lent at the moment.
func (rd *Reader) InFlight() int64 {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return int64(rd.lent) * chunkSize
}

// limit is the longest body Read takes: Max, or the budget if smaller.
func (rd *Reader) limit() int64 { return min(rd.cfg.Max, int64(rd.max)*chunkSize) }

// Body is a body read by [Reader.Read], held in memory lent by the Reader
// until Release.
type Body struct {
	rd     *Reader
	chunks [][]byte
	n      int64
}

// Len returns the body's length.
func (b *Body) Len() int64 { return b.n }

// Bytes returns a copy of the body in one slice.
func (b *Body) Bytes() []byte {
	out := make([]byte, 0, b.n)
	for _, c := range b.chunks {
		out = append(out, c...)
	}
	return out
}

// Release gives the body's memory back to the Reader. The Body is empty
// afterwards; Release may be called again.
func (b *Body) Release() {
	if b.chunks != nil {
		b.rd.give(b.chunks)
	}
	b.chunks, b.n = nil, 0
}

// Read reads the body of r into memory lent by the Reader, within its
// Config, writing every byte to h as it arrives (h may be nil). A body
// whose Content-Length exceeds Config.Max, or the budget, is refused
// before any of it is read. On error nothing is held, the rest of the body
// will not be waited for, and the caller answers with [Refuse].
func (rd *Reader) Read(w http.ResponseWriter, r *http.Request, h io.Writer) (body *Body, err error) {
	limit := rd.limit()
	if r.ContentLength > limit {
		return nil, ErrTooLarge
	}
	lift := rd.deadline(w)
	defer func() {
		if err == nil {
			lift()
		}
	}()
	b := &Body{rd: rd}
	for {
		if len(b.chunks) == 0 || len(b.chunks[len(b.chunks)-1]) == chunkSize {
			c := rd.take()
			if c == nil {
				// A body that fills the budget exactly is taken.
				var probe [1]byte
				n, err := r.Body.Read(probe[:])
				for n == 0 && err == nil {
					n, err = r.Body.Read(probe[:])
				}
				if n == 0 && err == io.EOF {
					return b, nil
				}
				held := b.n
				b.Release()
				switch {
				case n == 1 && held == limit:
					return nil, ErrTooLarge
				case n == 1:
					return nil, ErrBusy
				}
				return nil, readError(err)
			}
			b.chunks = append(b.chunks, c)
		}
		last := &b.chunks[len(b.chunks)-1]
		n, err := r.Body.Read((*last)[len(*last):chunkSize])
		if n > 0 {
			if h != nil {
				h.Write((*last)[len(*last) : len(*last)+n])
			}
			*last = (*last)[:len(*last)+n]
			b.n += int64(n)
			if b.n > limit {
				b.Release()
				return nil, ErrTooLarge
			}
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			b.Release()
			return nil, readError(err)
		}
	}
}

// Discard reads the body of r into h without keeping it, within the
// Reader's Max and Timeout (it takes nothing of the budget), and returns
// its length.
func (rd *Reader) Discard(w http.ResponseWriter, r *http.Request, h io.Writer) (n int64, err error) {
	if r.ContentLength > rd.cfg.Max {
		return 0, ErrTooLarge
	}
	lift := rd.deadline(w)
	defer func() {
		if err == nil {
			lift()
		}
	}()
	if h == nil {
		h = io.Discard
	}
	n, err = io.CopyBuffer(h, io.LimitReader(r.Body, rd.cfg.Max+1), make([]byte, 8<<10))
	switch {
	case err != nil:
		return n, readError(err)
	case n > rd.cfg.Max:
		return n, ErrTooLarge
	}
	return n, nil
}

// deadline sets the read deadline of w's connection Config.Timeout from
// now, and returns the function that lifts it once the body is read. On
// error it is left, or moved to now by Refuse: net/http reads what is left
// of a small body after the handler, and must not wait for a sender that
// stalls.
func (rd *Reader) deadline(w http.ResponseWriter) (lift func()) {
	if rd.cfg.Timeout <= 0 {
		return func() {}
	}
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(rd.cfg.Timeout)); err != nil {
		rd.noDeadline.Do(func() {
			rd.cfg.Logger.Warn("webhook bodies are read without a deadline: the ResponseWriter cannot set one; give wrapping ResponseWriters an Unwrap method", "err", err)
		})
		return func() {}
	}
	return func() { rc.SetReadDeadline(time.Time{}) }
}

// readError classifies an error reading a body.
func readError(err error) error {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	case errors.As(err, &tooLarge):
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	}
	return fmt.Errorf("read the webhook body: %w", err)
}

// RetryAfter is the Retry-After, in seconds, of the answer to ErrBusy.
const RetryAfter = 5

// Abandon gives the body of r up, unread or read in part, before the
// answer: its read deadline is moved to now, so that net/http, which reads
// what is left of a small body once the handler returns, does not wait for
// a sender that stalls; and an HTTP/1 connection is closed after the
// answer, since the rest of its body cannot be skipped.
func Abandon(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
	http.NewResponseController(w).SetReadDeadline(time.Now())
}

// Refuse answers a request whose body could not be read with err: 413 for
// ErrTooLarge, 503 with Retry-After for ErrBusy, 408 for ErrTimeout, else
// 400; the body is abandoned (see [Abandon]).
func Refuse(w http.ResponseWriter, r *http.Request, err error) {
	Abandon(w, r)
	switch {
	case errors.Is(err, ErrTooLarge):
		http.Error(w, "the delivery is too large", http.StatusRequestEntityTooLarge)
	case errors.Is(err, ErrBusy):
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfter))
		http.Error(w, "too many deliveries are being read at once; deliver again later", http.StatusServiceUnavailable)
	case errors.Is(err, ErrTimeout):
		http.Error(w, "the delivery's body did not arrive in time", http.StatusRequestTimeout)
	default:
		http.Error(w, "could not read the delivery", http.StatusBadRequest)
	}
}
