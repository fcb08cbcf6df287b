package config

import (
	"fmt"
	"os"
	"time"

	"github.com/quiverhq/quiver/a2a"
)

// A2ARemotes returns the configuration's A2A agents, checked, with ${VAR} expanded in their
// headers. Their cards are read by a2a.Tool, when the tools are made.
func (f *File) A2ARemotes() ([]a2a.Remote, error) {
	var out []a2a.Remote
	seen := map[string]bool{}
	for i, c := range f.A2A.Agents {
		r := a2a.Remote{Name: c.Name, URL: c.URL, RequiresConfirmation: c.RequiresConfirmation, Connection: c.Connection}
		switch {
		case c.Name == "":
			return nil, fmt.Errorf("a2a.agents[%d]: name is missing: it is the tool's name", i)
		case seen[c.Name]:
			return nil, fmt.Errorf("a2a.agents[%d]: the name %q is used twice; names must be unique", i, c.Name)
		case c.URL == "":
			return nil, fmt.Errorf("a2a.agents[%d] (%s): url is missing: the agent's URL (its card under it) or its card's", i, c.Name)
		case c.Connection != nil && c.Connection.Provider == "":
			return nil, fmt.Errorf("a2a.agents[%d] (%s): connection.provider is missing: the provider whose token each call carries", i, c.Name)
		}
		seen[c.Name] = true
		if c.Timeout != "" {
			d, err := time.ParseDuration(c.Timeout)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("a2a.agents[%d] (%s): timeout %q is not a positive duration like 30s or 5m", i, c.Name, c.Timeout)
			}
			r.Timeout = d
		}
		if len(c.Headers) > 0 {
			r.Headers = map[string]string{}
			for k, v := range c.Headers {
				r.Headers[k] = os.ExpandEnv(v)
			}
		}
		out = append(out, r)
	}
	return out, nil
}
