package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// clientTimeout bounds the client process, whatever the server does.
const clientTimeout = 10 * time.Minute

// runClient is the client role. It reports to the server as JSON lines on
// stdout and stops when its stdin closes.
func runClient(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if path := os.Getenv("SSEBENCH_CLIENT_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	p := new(http.Protocols)
	switch o.proto {
	case "http1":
		p.SetHTTP1(true)
	case "h2c":
		p.SetUnencryptedHTTP2(true)
	default:
		return fmt.Errorf("unknown -proto %q", o.proto)
	}
	client := &http.Client{Transport: &http.Transport{Protocols: p, DisableCompression: true, MaxIdleConnsPerHost: 100}}
	switch o.client {
	case "idle":
		streams, err := openStreams(ctx, client, o.url, o.key, o.n)
		if err != nil {
			return err
		}
		report(map[string]int{"open": len(streams)})
		// Every stream delivers one frame before it is measured: a real
		// idle stream writes a keepalive now and then.
		var received atomic.Int64
		var wg sync.WaitGroup
		for _, r := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				br := bufio.NewReader(r.Body)
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						return
					}
					if len(line) == 1 {
						received.Add(1)
						return
					}
				}
			}()
		}
		wg.Wait()
		report(map[string]int{"received": int(received.Load())})
		<-ctx.Done()
		for _, r := range streams {
			r.Body.Close()
		}
		return nil
	case "fanout":
		return clientFanout(ctx, client, o)
	case "replay":
		return clientReplay(ctx, client, o)
	}
	return fmt.Errorf("unknown -client %q", o.client)
}

// report writes v as one JSON line for the server.
func report(v any) {
	b, _ := json.Marshal(v)
	os.Stdout.Write(append(b, '\n'))
}

// get opens one stream.
func get(ctx context.Context, client *http.Client, url, key string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	return resp, nil
}

// openStreams opens n streams, 32 at a time, and returns them once every
// one has its response headers.
func openStreams(ctx context.Context, client *http.Client, url, key string, n int) ([]*http.Response, error) {
	out := make([]*http.Response, n)
	var (
		next     atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				resp, err := get(ctx, client, url, key)
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("stream %d: %w", i, err) })
					return
				}
				out[i] = resp
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// identifier returns the taskIdentifier in the data line of a frame.
func identifier(data []byte) []byte {
	const member = `"taskIdentifier":"`
	i := bytes.Index(data, []byte(member))
	if i < 0 {
		return nil
	}
	rest := data[i+len(member):]
	if j := bytes.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return nil
}

// clientFanout reads every stream until the END event and reports the
// latency of the LAT events: receive time minus the publish time in their
// identifier.
func clientFanout(ctx context.Context, client *http.Client, o options) error {
	streams, err := openStreams(ctx, client, o.url, o.key, o.n)
	if err != nil {
		return err
	}
	report(map[string]int{"open": len(streams)})
	lat := make([][]int64, len(streams))
	var finished atomic.Int64
	var wg sync.WaitGroup
	for i, resp := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer resp.Body.Close()
			br := bufio.NewReaderSize(resp.Body, 16<<10)
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return
				}
				data, ok := bytes.CutPrefix(line, []byte("data: "))
				if !ok {
					continue
				}
				now := time.Now().UnixNano()
				ident := identifier(data)
				if sent, ok := bytes.CutPrefix(ident, []byte("LAT-")); ok {
					ns, err := strconv.ParseInt(string(sent), 10, 64)
					if err == nil {
						lat[i] = append(lat[i], now-ns)
					}
				} else if bytes.HasPrefix(ident, []byte("END-")) {
					finished.Add(1)
					return
				}
			}
		}()
	}
	wg.Wait()
	var all []int64
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	var maxLat int64
	if len(all) > 0 {
		maxLat = all[len(all)-1]
	}
	report(fanoutReport{
		Streams: int(finished.Load()), Received: len(all),
		P50: ms(percentile(all, 50)), P90: ms(percentile(all, 90)), P99: ms(percentile(all, 99)), Max: ms(maxLat),
	})
	return nil
}

// clientReplay reads the stream from the cursor until it has o.n events.
func clientReplay(ctx context.Context, client *http.Client, o options) error {
	start := time.Now()
	resp, err := get(ctx, client, o.url+"?cursor="+o.cursor, o.key)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var (
		events int
		bytes  int64
	)
	for events < o.n {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("after %d events: %w", events, err)
		}
		bytes += int64(len(line))
		if len(line) > 4 && string(line[:4]) == "id: " {
			events++
		}
	}
	report(replayReport{Events: events, Seconds: time.Since(start).Seconds(), Bytes: bytes})
	return nil
}
