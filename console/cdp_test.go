//go:build unix

package console_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testsupport"
)

// cdpOrigin is the Origin of the test's DevTools connection. Chromium
// refuses DevTools websockets from origins it was not told to allow; no
// page can have this one, so no page can drive the browser.
const cdpOrigin = "http://devtools-client.invalid"

// cdpBrowser is a headless Chromium driven through the Chrome DevTools
// Protocol, over the browser's websocket, in flat session mode: every
// page's commands and events travel on the one connection, marked with the
// page's session ID.
type cdpBrowser struct {
	t  testing.TB
	ws *websocket.Conn

	mu      sync.Mutex
	nextID  int64
	waiting map[int64]chan cdpMessage
	pages   map[string]*cdpPage // by session ID
	done    chan struct{}       // closed when the connection ends
}

// cdpMessage is a command, an answer or an event.
type cdpMessage struct {
	ID        int64           `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    any             `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// cdpEvent is an event as received, its params kept raw.
type cdpEvent struct {
	SessionID string          `json:"sessionId"`
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params"`
}

var devtoolsURL = regexp.MustCompile(`DevTools listening on (ws://\S+)`)

// startBrowser starts headless Chromium on loopback with a fresh profile
// and connects to it; the test's cleanup kills its process group. It
// skips the test when there is no Chromium (fails it under CI=true).
func startBrowser(t testing.TB) *cdpBrowser {
	t.Helper()
	chromium := testsupport.FindChromium(t)
	profile := t.TempDir() // removed after the browser is killed below
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir="+profile, "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
		"--remote-allow-origins="+cdpOrigin, "about:blank")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so that its helpers are stopped with it
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	log := &apitest.LogBuffer{}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(log, line)
			if m := devtoolsURL.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	b := &cdpBrowser{t: t, waiting: make(map[int64]chan cdpMessage), pages: make(map[string]*cdpPage), done: make(chan struct{})}
	t.Cleanup(func() {
		if b.ws != nil {
			b.ws.Close()
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if t.Failed() {
			t.Logf("chromium's output:\n%s", log)
		}
	})
	var wsURL string
	select {
	case wsURL = <-found:
	case <-time.After(testsupport.BrowserTimeout):
		t.Fatalf("chromium did not print its DevTools address within %s", testsupport.BrowserTimeout)
	}
	b.ws, err = websocket.Dial(wsURL, "", cdpOrigin)
	if err != nil {
		t.Fatalf("connect to chromium's DevTools at %s: %v", wsURL, err)
	}
	b.ws.MaxPayloadBytes = 64 << 20 // screenshots
	go b.read()
	return b
}

// read dispatches answers to their callers and events to their pages
// until the connection ends.
func (b *cdpBrowser) read() {
	defer close(b.done)
	for {
		var raw []byte
		if err := websocket.Message.Receive(b.ws, &raw); err != nil {
			return
		}
		var m cdpMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			continue
		}
		if m.ID != 0 {
			b.mu.Lock()
			ch := b.waiting[m.ID]
			delete(b.waiting, m.ID)
			b.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		var ev cdpEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			continue
		}
		b.mu.Lock()
		p := b.pages[ev.SessionID]
		b.mu.Unlock()
		if p != nil {
			p.event(ev)
		}
	}
}

// call sends a command (to the browser when session is "") and decodes
// its result into result (when not nil). It gives up after testsupport.BrowserTimeout.
func (b *cdpBrowser) call(session, method string, params, result any) error {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan cdpMessage, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	if params == nil {
		params = struct{}{}
	}
	if err := websocket.JSON.Send(b.ws, cdpMessage{ID: id, SessionID: session, Method: method, Params: params}); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, m.Error.Message, m.Error.Code)
		}
		if result != nil {
			if err := json.Unmarshal(m.Result, result); err != nil {
				return fmt.Errorf("%s: decode %s: %w", method, m.Result, err)
			}
		}
		return nil
	case <-b.done:
		return fmt.Errorf("%s: the DevTools connection ended", method)
	case <-time.After(testsupport.BrowserTimeout):
		b.mu.Lock()
		delete(b.waiting, id)
		b.mu.Unlock()
		return fmt.Errorf("%s: no answer within %s", method, testsupport.BrowserTimeout)
	}
}

// must runs call and fails the test on an error.
func (b *cdpBrowser) must(session, method string, params, result any) {
	b.t.Helper()
	if err := b.call(session, method, params, result); err != nil {
		b.t.Fatal(err)
	}
}

// newContext returns a new browser context: a profile of its own, with
// its own cookies, like an incognito window.
func (b *cdpBrowser) newContext() string {
	b.t.Helper()
	var res struct {
		BrowserContextID string `json:"browserContextId"`
	}
	b.must("", "Target.createBrowserContext", map[string]any{"disposeOnDetach": true}, &res)
	return res.BrowserContextID
}

// cdpPage is a tab, attached to the test, that records what would show in
// its DevTools console as a problem.
type cdpPage struct {
	b       *cdpBrowser
	t       testing.TB
	session string

	mu       sync.Mutex
	problems []string       // errors and exceptions of the page, CSP violations, dialogs
	network  []networkError // failed loads, kept apart: some are expected
}

// networkError is a load that failed, as the console shows it.
type networkError struct {
	URL, Text string
}

// newPage opens a tab of 1280x800 in browser context ctx ("" for the
// default one) at about:blank and starts recording its problems.
func (b *cdpBrowser) newPage(ctx string) *cdpPage {
	b.t.Helper()
	var target struct {
		TargetID string `json:"targetId"`
	}
	params := map[string]any{"url": "about:blank"}
	if ctx != "" {
		params["browserContextId"] = ctx
	}
	b.must("", "Target.createTarget", params, &target)
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	b.must("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached)
	p := &cdpPage{b: b, t: b.t, session: attached.SessionID}
	b.mu.Lock()
	b.pages[p.session] = p
	b.mu.Unlock()
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable"} {
		p.must(m, nil, nil)
	}
	p.must("Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": false}, nil)
	return p
}

func (p *cdpPage) call(method string, params, result any) error {
	return p.b.call(p.session, method, params, result)
}

func (p *cdpPage) must(method string, params, result any) {
	p.t.Helper()
	if err := p.call(method, params, result); err != nil {
		p.t.Fatal(err)
	}
}

// event records the problems an event reports. It runs on the reader, so
// it never waits for an answer itself.
func (p *cdpPage) event(ev cdpEvent) {
	switch ev.Method {
	case "Runtime.consoleAPICalled":
		var e struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		json.Unmarshal(ev.Params, &e)
		if e.Type == "error" || e.Type == "assert" {
			var parts []string
			for _, a := range e.Args {
				if a.Description != "" {
					parts = append(parts, a.Description)
				} else {
					parts = append(parts, fmt.Sprint(a.Value))
				}
			}
			p.problem("console." + e.Type + ": " + strings.Join(parts, " "))
		}
	case "Runtime.exceptionThrown":
		var e struct {
			Details struct {
				Text      string `json:"text"`
				URL       string `json:"url"`
				Line      int    `json:"lineNumber"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		json.Unmarshal(ev.Params, &e)
		d := e.Details
		p.problem(fmt.Sprintf("exception at %s:%d: %s %s", d.URL, d.Line+1, d.Text, d.Exception.Description))
	case "Log.entryAdded":
		var e struct {
			Entry struct {
				Source string `json:"source"`
				Level  string `json:"level"`
				Text   string `json:"text"`
				URL    string `json:"url"`
			} `json:"entry"`
		}
		json.Unmarshal(ev.Params, &e)
		if e.Entry.Level != "error" {
			return
		}
		if e.Entry.Source == "network" {
			p.mu.Lock()
			p.network = append(p.network, networkError{URL: e.Entry.URL, Text: e.Entry.Text})
			p.mu.Unlock()
			return
		}
		p.problem(fmt.Sprintf("log (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL))
	case "Page.javascriptDialogOpening":
		var e struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}
		json.Unmarshal(ev.Params, &e)
		p.problem(fmt.Sprintf("a %s dialog opened: %q", e.Type, e.Message))
		go p.call("Page.handleJavaScriptDialog", map[string]any{"accept": true}, nil)
	}
}

func (p *cdpPage) problem(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.problems = append(p.problems, s)
}

// checkProblems fails the test for every problem recorded so far, and for
// every failed load that expected does not accept (nil accepts none).
func (p *cdpPage) checkProblems(expected func(networkError) bool) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.problems {
		p.t.Errorf("the page reported: %s", s)
	}
	for _, n := range p.network {
		if expected == nil || !expected(n) {
			p.t.Errorf("the page failed to load %s: %s", n.URL, n.Text)
		}
	}
}

// networkErrors returns the failed loads recorded so far.
func (p *cdpPage) networkErrors() []networkError {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]networkError(nil), p.network...)
}

// navigate loads url and waits until its document has loaded.
func (p *cdpPage) navigate(url string) {
	p.t.Helper()
	var res struct {
		ErrorText string `json:"errorText"`
	}
	p.must("Page.navigate", map[string]any{"url": url}, &res)
	if res.ErrorText != "" {
		p.t.Fatalf("navigate to %s: %s", url, res.ErrorText)
	}
	p.waitFor(`document.readyState === "complete"`, testsupport.BrowserTimeout)
}

// errContextGone is an evaluation cut short by a navigation.
var errContextGone = errors.New("the page navigated during the evaluation")

// eval evaluates expr in the page, awaiting a promise, and decodes its
// value into result (when not nil).
func (p *cdpPage) eval(expr string, result any) error {
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := p.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &res)
	if err != nil {
		if strings.Contains(err.Error(), "context was destroyed") || strings.Contains(err.Error(), "Cannot find context") {
			return errContextGone
		}
		return err
	}
	if d := res.ExceptionDetails; d != nil {
		return fmt.Errorf("evaluate %s: %s %s", expr, d.Text, d.Exception.Description)
	}
	if result != nil && len(res.Result.Value) > 0 {
		return json.Unmarshal(res.Result.Value, result)
	}
	return nil
}

// value evaluates expr and returns its value, failing the test on an error.
func value[T any](p *cdpPage, expr string) T {
	p.t.Helper()
	var v T
	if err := p.eval(expr, &v); err != nil {
		p.t.Fatal(err)
	}
	return v
}

// waitFor waits until the JavaScript expression cond is true in the page,
// checking it at each change of the document and every 50 ms, and fails
// the test after timeout.
func (p *cdpPage) waitFor(cond string, timeout time.Duration) {
	p.t.Helper()
	if !p.await(cond, timeout) {
		p.t.Fatalf("the page did not show %s within %s", cond, timeout)
	}
}

// await reports whether the JavaScript expression cond became true
// within timeout; see waitFor.
func (p *cdpPage) await(cond string, timeout time.Duration) bool {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	expr := fmt.Sprintf(`new Promise((resolve) => {
  const check = () => { try { return !!(%s); } catch (e) { return false; } };
  if (check()) return resolve(true);
  let timer = 0, tick = 0;
  const done = (v) => { obs.disconnect(); clearTimeout(timer); clearInterval(tick); resolve(v); };
  const obs = new MutationObserver(() => { if (check()) done(true); });
  obs.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
  tick = setInterval(() => { if (check()) done(true); }, 50);
  timer = setTimeout(() => done(check()), %d);
})`, cond, max(1, min(time.Until(deadline), 5*time.Second).Milliseconds()))
	for {
		var ok bool
		err := p.eval(expr, &ok)
		switch {
		case err == nil && ok:
			return true
		case err != nil && !errors.Is(err, errContextGone):
			p.t.Fatal(err)
		}
		if time.Now().After(deadline) {
			return false
		}
		if err != nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// click clicks, as a mouse would, the middle of the first element that
// matches the CSS selector sel.
func (p *cdpPage) click(sel string) {
	p.t.Helper()
	var box struct{ X, Y float64 }
	err := p.eval(fmt.Sprintf(`(() => {
  const el = document.querySelector(%q);
  if (!el) throw new Error("no element matches " + %q);
  el.scrollIntoView({block: "center", inline: "center"});
  const r = el.getBoundingClientRect();
  return {X: r.left + r.width / 2, Y: r.top + r.height / 2};
})()`, sel, sel), &box)
	if err != nil {
		p.t.Fatal(err)
	}
	for _, typ := range []string{"mouseMoved", "mousePressed", "mouseReleased"} {
		p.must("Input.dispatchMouseEvent", map[string]any{"type": typ, "x": box.X, "y": box.Y, "button": "left", "clickCount": 1}, nil)
	}
}

// typeInto focuses the element that matches sel and types text into it,
// as a keyboard (or a paste) would.
func (p *cdpPage) typeInto(sel, text string) {
	p.t.Helper()
	if err := p.eval(fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) throw new Error("no element matches " + %q); el.focus(); })()`, sel, sel), nil); err != nil {
		p.t.Fatal(err)
	}
	p.must("Input.insertText", map[string]any{"text": text}, nil)
}

// screenshot writes a PNG of the page's viewport to path.
func (p *cdpPage) screenshot(path string) {
	p.t.Helper()
	var res struct {
		Data string `json:"data"`
	}
	p.must("Page.captureScreenshot", map[string]any{"format": "png"}, &res)
	png, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}
