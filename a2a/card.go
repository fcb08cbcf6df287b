package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/quiverhq/quiver/a2a/a2av1"
)

// card is what Quiver reads of an agent card, of A2A 0.3 or 1.0 (or one that serves both):
// who the agent is, and where and in which versions it is reached.
type card struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Skills      []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"skills"`
	// 1.0: every interface with its binding and version.
	SupportedInterfaces []a2av1.AgentInterface `json:"supportedInterfaces"`
	// 0.3: the main interface, the card's version, and the others.
	URL                  string `json:"url"`
	PreferredTransport   string `json:"preferredTransport"`
	ProtocolVersion      string `json:"protocolVersion"`
	AdditionalInterfaces []struct {
		Transport string `json:"transport"`
		URL       string `json:"url"`
	} `json:"additionalInterfaces"`
}

// endpoint is an interface of the agent Quiver can call: its URL and version ("1" or "0.3").
type endpoint struct {
	url     string
	version string
}

// readCard reads the agent's card at the configured URL: the agent's base URL (the card is
// at /.well-known/agent-card.json under it) or the card's own (ending in .json).
func readCard(ctx context.Context, client *http.Client, u *url.URL) (*card, error) {
	at := *u
	if !strings.HasSuffix(u.Path, ".json") {
		at.Path = strings.TrimSuffix(u.Path, "/") + a2av1.CardPath
	}
	ctx, cancel := context.WithTimeout(ctx, cardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, at.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, withoutURL(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return nil, err
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET %s answered HTTP %d", at.Redacted(), resp.StatusCode)
	}
	var c card
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("%s is not an agent card (a JSON object): %v", at.Redacted(), err)
	}
	return &c, nil
}

// interfaces are the card's interfaces, 1.0's list and then 0.3's fields, each with its
// binding and version (an interface of 0.3's fields speaks the card's protocolVersion, 0.3
// where it names none).
func (c *card) interfaces() []a2av1.AgentInterface {
	out := slices.Clone(c.SupportedInterfaces)
	legacy := c.ProtocolVersion
	if legacy == "" {
		legacy = a2av1.LegacyVersion
	}
	if c.URL != "" {
		binding := c.PreferredTransport
		if binding == "" {
			binding = a2av1.BindingJSONRPC
		}
		out = append(out, a2av1.AgentInterface{URL: c.URL, ProtocolBinding: binding, ProtocolVersion: legacy})
	}
	for _, i := range c.AdditionalInterfaces {
		out = append(out, a2av1.AgentInterface{URL: i.URL, ProtocolBinding: i.Transport, ProtocolVersion: legacy})
	}
	return out
}

// choose picks the interface to call: JSON-RPC, in the newest version both sides speak (1.0,
// else 0.3), on the configured URL's origin (where the configured headers go, and nowhere
// else). A card Quiver cannot use is refused saying what it lacks.
func (c *card) choose(configured *url.URL) (endpoint, error) {
	ifaces := c.interfaces()
	best, version := pick(ifaces)
	if best == nil {
		if len(ifaces) == 0 {
			return endpoint{}, errors.New("its card offers no interface at all (neither 1.0's supportedInterfaces nor 0.3's url)")
		}
		offered := make([]string, 0, len(ifaces))
		for _, i := range ifaces {
			offered = append(offered, strings.TrimSpace(i.ProtocolBinding+" "+i.ProtocolVersion))
		}
		return endpoint{}, fmt.Errorf("its card offers no JSON-RPC interface of A2A 0.3 or 1.0, the ones Quiver speaks: it offers %s",
			strings.Join(slices.Compact(offered), ", "))
	}
	u, err := url.Parse(best.URL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return endpoint{}, fmt.Errorf("its JSON-RPC interface of A2A %s has the URL %q, not an http or https URL", best.ProtocolVersion, best.URL)
	case best.Tenant != "":
		return endpoint{}, fmt.Errorf("its JSON-RPC interface of A2A %s names a tenant (%q), which Quiver does not send", best.ProtocolVersion, best.Tenant)
	case u.Scheme != configured.Scheme || u.Host != configured.Host:
		return endpoint{}, fmt.Errorf("its JSON-RPC endpoint %s is on another origin than %s://%s, where Quiver sends the agent's headers: "+
			"configure the endpoint's own origin as the url", u.Redacted(), configured.Scheme, configured.Host)
	}
	return endpoint{url: best.URL, version: version}, nil
}

// pick is the first JSON-RPC interface of 1.0, else the first of 0.x (0.3, and the versions
// before it that the SDK's 0.3 client reads), with its version ("1" or "0.3"); nil if none.
func pick(ifaces []a2av1.AgentInterface) (*a2av1.AgentInterface, string) {
	var legacy *a2av1.AgentInterface
	for i := range ifaces {
		if !strings.EqualFold(ifaces[i].ProtocolBinding, a2av1.BindingJSONRPC) {
			continue
		}
		switch v := a2av1.Major(ifaces[i].ProtocolVersion); {
		case v == "1":
			return &ifaces[i], "1"
		case strings.HasPrefix(v, "0.") && legacy == nil:
			legacy = &ifaces[i]
		}
	}
	if legacy == nil {
		return nil, ""
	}
	return legacy, a2av1.LegacyVersion
}

// describe is the tool's description: the card's, and its skills.
func (c *card) describe() string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(c.Description))
	if b.Len() == 0 {
		fmt.Fprintf(&b, "The agent %s, reached over A2A.", c.Name)
	}
	if len(c.Skills) > 0 {
		b.WriteString("\n\nIts skills:")
		for _, s := range c.Skills {
			fmt.Fprintf(&b, "\n- %s: %s", s.Name, strings.TrimSpace(s.Description))
		}
	}
	b.WriteString("\n\nSend it a message; to continue a conversation, give the context_id (and task_id) of its last answer.")
	return b.String()
}
