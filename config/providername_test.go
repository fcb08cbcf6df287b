package config_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/config"
)

// Issue 46: provider_name in the configuration file, in the governance block or a source's
// list: read as the rule's ProviderName; refused, naming the entry and the rule, when it could
// name several tools, is no name every provider accepts, or is given to two tools by rules of
// any entries.
func TestGovernanceProviderNameRules(t *testing.T) {
	cases := []struct {
		name    string
		doc     string
		want    map[string]string // tool -> provider name, of the rules that set one
		wantErr string
	}{
		{"the block's and a source's", `
governance:
  - tools: [lookup_customer]
    provider_name: find_customer
openapi:
  - name: shop
    document: shop.yaml
    governance:
      - tools: [shop.createRefund]
        provider_name: issue_refund
`, map[string]string{"lookup_customer": "find_customer", "shop.createRefund": "issue_refund"}, ""},
		{"a pattern", `governance: [{tools: ["payments.*"], provider_name: refund}]`, nil,
			`governance rule 1: provider_name "refund" needs one tool named exactly, not the pattern "payments.*"`},
		{"a source's rule for its every tool", `
mcp:
  servers:
    - name: ledger
      url: https://ledger.example.com/mcp
      governance: [{provider_name: ledger}]
`, nil, `mcp.servers[0] (ledger): governance rule 1: provider_name "ledger" needs one tool named exactly: give tools: [NAME]`},
		{"a name with a dot", `governance: [{tools: [shop.createRefund], provider_name: shop.refund}]`, nil,
			`governance rule 1: provider_name "shop.refund" is not a name every model provider accepts: give 1 to 64 characters`},
		{"one name for two tools, across entries", `
governance:
  - tools: [lookup_customer]
    provider_name: refund
openapi:
  - name: shop
    document: shop.yaml
    governance:
      - {tools: [shop.createRefund], provider_name: refund}
`, nil, `openapi[0] (shop): governance rule 1: provider_name "refund" is given to "lookup_customer" by governance rule 1 already`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := config.Parse(strings.NewReader(c.doc), "quiver.yaml")
			var rules []quiver.Rule
			if err == nil {
				rules, err = f.Rules()
			}
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v; want it to say %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, r := range rules {
				if r.ProviderName != "" {
					got[r.Tools[0]] = r.ProviderName
				}
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("provider names %v, want %v", got, c.want)
			}
		})
	}
}
