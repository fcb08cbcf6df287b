//go:build linux && (amd64 || arm64)

package main

import (
	"os"
	"testing"
)

func TestParseStatus(t *testing.T) {
	status := "Name:\tquiver\nVmPeak:\t 1000 kB\nVmRSS:\t   40720 kB\nRssAnon:\t    8536 kB\nRssFile:\t   32184 kB\nRssShmem:\t 0 kB\n"
	m, err := parseStatus(status)
	if err != nil {
		t.Fatal(err)
	}
	if want := (mem{rss: 40720, anon: 8536, file: 32184}); m != want {
		t.Errorf("parseStatus = %+v, want %+v", m, want)
	}
	if _, err := parseStatus("Name:\tquiver\nVmRSS:\t 1 kB\n"); err == nil {
		t.Error("a status without RssAnon and RssFile parsed")
	}
}

func TestReadMemOfThisProcess(t *testing.T) {
	m, err := readMem(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.rss <= 0 || m.anon+m.file > m.rss+m.rss/10 {
		t.Errorf("implausible memory of this process: %+v", m)
	}
}

func TestMedianPerField(t *testing.T) {
	s := []sample{
		{idle: mem{rss: 30, anon: 1, file: 29}},
		{idle: mem{rss: 10, anon: 9, file: 1}},
		{idle: mem{rss: 20, anon: 5, file: 15}},
	}
	got := median(s, func(s sample) mem { return s.idle })
	if want := (mem{rss: 20, anon: 5, file: 15}); got != want {
		t.Errorf("median = %+v, want %+v", got, want)
	}
}
