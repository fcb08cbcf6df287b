// Package wiretest is a local HTTP server for provider tests: it records every request and
// answers with canned replies shaped like a provider's real ones, as JSON or as server-sent
// events, so the real SDK client runs end to end on 127.0.0.1.
package wiretest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Event is one server-sent event; an empty Name sends only the data line.
type Event struct {
	Name string
	Data string
}

// Reply is one canned answer.
type Reply struct {
	Status int // 0 means 200
	Header map[string]string
	Body   string  // a JSON body, sent when Events is nil
	Events []Event // a text/event-stream body
	// Hang holds the request until the client gives up, for cancellation tests.
	Hang bool
}

// Request is a request the server received.
type Request struct {
	Method string
	Path   string // with the query, if any
	Header http.Header
	Body   []byte
}

// JSON decodes the request body.
func (r Request) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("request body is not a JSON object: %v\n%s", err, r.Body)
	}
	return m
}

// Server answers each request with the next reply; past the last it answers 500.
type Server struct {
	URL     string
	mu      sync.Mutex
	replies []Reply
	reqs    []Request
	stop    chan struct{}
	// Hung receives a value when a Hang reply starts holding its request.
	Hung chan struct{}
}

// New starts a server on 127.0.0.1 that is closed when the test ends.
func New(t testing.TB, replies ...Reply) *Server {
	t.Helper()
	s := &Server{replies: replies, stop: make(chan struct{}), Hung: make(chan struct{}, 16)}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = hs.URL
	t.Cleanup(func() {
		close(s.stop)
		hs.Close()
	})
	return s
}

// Requests returns what the server received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Last returns the last request received; it fails the test when there was none.
func (s *Server) Last(t testing.TB) Request {
	t.Helper()
	reqs := s.Requests()
	if len(reqs) == 0 {
		t.Fatal("the server received no request")
	}
	return reqs[len(reqs)-1]
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rep := s.take(r)
	if rep.Hang {
		s.Hung <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-s.stop:
		}
		return
	}
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	status := rep.Status
	if status == 0 {
		status = http.StatusOK
	}
	if rep.Events == nil {
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		io.WriteString(w, rep.Body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(status)
	writeEvents(w, rep.Events)
}

// take records the request and takes the next reply; a 500 when none is left.
func (s *Server) take(r *http.Request) Reply {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body})
	if len(s.replies) == 0 {
		return Reply{Status: 500, Body: `{"error":{"message":"wiretest: no reply left"}}`}
	}
	rep := s.replies[0]
	s.replies = s.replies[1:]
	return rep
}

// writeEvents writes server-sent events, each flushed as it is written.
func writeEvents(w http.ResponseWriter, events []Event) {
	f, _ := w.(http.Flusher)
	for _, e := range events {
		if e.Name != "" {
			fmt.Fprintf(w, "event: %s\n", e.Name)
		}
		fmt.Fprintf(w, "data: %s\n\n", e.Data)
		if f != nil {
			f.Flush()
		}
	}
}
