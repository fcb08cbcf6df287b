package openapi

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// LoadTimeout bounds Load's fetch of a document by URL.
const LoadTimeout = 30 * time.Second

// Load reads a document from a file or an http or https URL, at most MaxDocumentBytes. A URL
// is fetched with client (http.DefaultClient when nil) within LoadTimeout.
func Load(ctx context.Context, location string, client *http.Client) ([]byte, error) {
	if !strings.HasPrefix(location, "http://") && !strings.HasPrefix(location, "https://") {
		return loadFile(location)
	}
	u, err := url.Parse(location)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("openapi: the document's URL %q is not a URL", location)
	}
	return fetch(ctx, u, cmp.Or(client, http.DefaultClient))
}

func loadFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("openapi: reading the document: %w", err)
	}
	defer f.Close()
	return readCapped(f, name)
}

// fetch reads the document at u within LoadTimeout.
func fetch(ctx context.Context, u *url.URL, client *http.Client) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, LoadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("openapi: fetching %s: %v", u.Redacted(), withoutURL(err))
	}
	req.Header.Set("Accept", "application/json, application/yaml;q=0.9, */*;q=0.5")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("openapi: fetching %s: %v", u.Redacted(), withoutURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("openapi: fetching %s: the server answered %s", u.Redacted(), resp.Status)
	}
	return readCapped(resp.Body, u.Redacted())
}

func readCapped(r io.Reader, where string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("openapi: reading %s: %w", where, err)
	}
	if len(data) > MaxDocumentBytes {
		return nil, fmt.Errorf("openapi: %s is larger than %d bytes", where, MaxDocumentBytes)
	}
	return data, nil
}
