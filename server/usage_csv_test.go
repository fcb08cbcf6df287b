package server

import (
	"encoding/csv"
	"strings"
	"testing"
	"time"
)

// usageCSV writes a value a spreadsheet would run as a formula with a leading quote, and the
// rest as they are.
func TestUsageCSVDefusesFormulas(t *testing.T) {
	b := &UsageBody{GroupBy: []string{"tool", "agent"}, Rows: []UsageRow{
		{Start: time.Unix(0, 0).UTC(), Tool: "=HYPERLINK(\"http://evil\")", Agent: "+cmd", UsageFigures: UsageFigures{Calls: 2, Cost: 0.5}},
		{Start: time.Unix(3600, 0).UTC(), Tool: "lookup_order", Agent: "-x", UsageFigures: UsageFigures{Calls: 1}},
		{Start: time.Unix(7200, 0).UTC(), Tool: "@sum", Agent: "helper"},
	}}
	lines, err := csv.NewReader(strings.NewReader(string(usageCSV(b)))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"1970-01-01T00:00:00Z", "'=HYPERLINK(\"http://evil\")", "'+cmd", "2"},
		{"1970-01-01T01:00:00Z", "lookup_order", "'-x", "1"},
		{"1970-01-01T02:00:00Z", "'@sum", "helper", "0"},
	}
	if len(lines) != 4 || strings.Join(lines[0][:4], ",") != "start,tool,agent,calls" {
		t.Fatalf("%q", lines)
	}
	for i, w := range want {
		if got := lines[i+1][:4]; strings.Join(got, "|") != strings.Join(w, "|") {
			t.Errorf("line %d: %q, want %q", i+1, got, w)
		}
	}
	if cost := lines[1][len(lines[1])-1]; cost != "0.5" {
		t.Errorf("cost %q", cost)
	}
}
