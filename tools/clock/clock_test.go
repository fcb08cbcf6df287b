package clock

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
)

// fixNow sets the clock to 2024-03-10T12:34:56Z (the day New York moves to summer time, after
// the change) for the duration of the test.
func fixNow(t *testing.T) {
	t.Helper()
	fixed := time.Date(2024, 3, 10, 12, 34, 56, 0, time.UTC)
	old := now
	now = func() time.Time { return fixed }
	t.Cleanup(func() { now = old })
}

func dispatcher(t *testing.T) *quiver.Dispatcher {
	t.Helper()
	reg := &quiver.Registry{}
	if err := reg.Register(Tool); err != nil {
		t.Fatal(err)
	}
	return &quiver.Dispatcher{Registry: reg}
}

func TestCurrentTime(t *testing.T) {
	fixNow(t)
	const unix = 1710074096
	tests := []struct {
		name string
		args string
		want Now
	}{
		{"default is UTC", `{}`, Now{Time: "2024-03-10T12:34:56Z", Timezone: "UTC", Unix: unix}},
		{"no arguments at all", ``, Now{Time: "2024-03-10T12:34:56Z", Timezone: "UTC", Unix: unix}},
		{"empty zone is UTC", `{"timezone":""}`, Now{Time: "2024-03-10T12:34:56Z", Timezone: "UTC", Unix: unix}},
		{"explicit UTC", `{"timezone":"UTC"}`, Now{Time: "2024-03-10T12:34:56Z", Timezone: "UTC", Unix: unix}},
		{"Europe/Paris (winter)", `{"timezone":"Europe/Paris"}`, Now{Time: "2024-03-10T13:34:56+01:00", Timezone: "Europe/Paris", Unix: unix}},
		{"America/New_York (summer time began)", `{"timezone":"America/New_York"}`,
			Now{Time: "2024-03-10T08:34:56-04:00", Timezone: "America/New_York", Unix: unix}},
		{"half-hour offset", `{"timezone":"Asia/Kolkata"}`, Now{Time: "2024-03-10T18:04:56+05:30", Timezone: "Asia/Kolkata", Unix: unix}},
		{"meta-field ignored", `{"timezone":"Europe/Paris","_reasoningForCall":"user asked"}`,
			Now{Time: "2024-03-10T13:34:56+01:00", Timezone: "Europe/Paris", Unix: unix}},
	}
	d := dispatcher(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := d.Dispatch(context.Background(), quiver.Call{Name: "get_current_time", Args: json.RawMessage(tt.args)})
			if err != nil {
				t.Fatal(err)
			}
			if r.IsError() {
				t.Fatalf("error result: %s", r.Error)
			}
			var got Now
			if err := json.Unmarshal(r.Value, &got); err != nil {
				t.Fatalf("value %s: %v", r.Value, err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCurrentTimeErrors(t *testing.T) {
	fixNow(t)
	tests := []struct {
		name    string
		args    string
		code    quiver.Code
		has     []string
		pointer string
	}{
		{"unknown zone", `{"timezone":"Mars/Olympus_Mons"}`, quiver.CodeInvalidArguments,
			[]string{`timezone "Mars/Olympus_Mons" is not a known IANA time zone`, "UTC, Europe/Paris or America/New_York"}, ""},
		{"Local rejected", `{"timezone":"Local"}`, quiver.CodeInvalidArguments, []string{`timezone "Local" is not a known IANA time zone`}, ""},
		{"path traversal", `{"timezone":"../../etc/passwd"}`, quiver.CodeInvalidArguments, []string{"not a known IANA time zone"}, ""},
		{"absolute path", `{"timezone":"/etc/localtime"}`, quiver.CodeInvalidArguments, []string{"not a known IANA time zone"}, ""},
		{"wrong type", `{"timezone":1}`, quiver.CodeInvalidArguments, []string{"/timezone: expected string, got number"}, "/timezone"},
		{"null zone", `{"timezone":null}`, quiver.CodeInvalidArguments, []string{"/timezone"}, "/timezone"},
		{"too long", `{"timezone":"` + strings.Repeat("A", 65) + `"}`, quiver.CodeInvalidArguments, []string{"/timezone: maximum length 64, got 65"}, "/timezone"},
		{"unknown property", `{"tz":"UTC"}`, quiver.CodeInvalidArguments, []string{`unknown property "tz"`}, ""},
		{"not an object", `"UTC"`, quiver.CodeInvalidArguments, []string{"must be a JSON object"}, ""},
	}
	d := dispatcher(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := d.Dispatch(context.Background(), quiver.Call{Name: "get_current_time", Args: json.RawMessage(tt.args)})
			if err != nil {
				t.Fatal(err)
			}
			if !r.IsError() || r.Code != tt.code {
				t.Fatalf("result %+v, want error %s", r, tt.code)
			}
			for _, s := range tt.has {
				if !strings.Contains(r.Error, s) {
					t.Errorf("error %q lacks %q", r.Error, s)
				}
			}
			if tt.pointer != "" && (len(r.Problems) == 0 || r.Problems[0].Pointer != tt.pointer) {
				t.Errorf("problems %+v, want pointer %s", r.Problems, tt.pointer)
			}
		})
	}
}

func TestToolDefinition(t *testing.T) {
	got, ok := quiver.Default.Lookup("get_current_time")
	if !ok || got != Tool {
		t.Fatal("importing the package does not register Tool in quiver.Default")
	}
	s := Tool.Spec()
	if s.InputSchema == nil || s.InputSchema.Properties["timezone"] == nil {
		t.Fatalf("input schema %v", s.InputSchema)
	}
	if len(s.InputSchema.Required) != 0 {
		t.Errorf("timezone should be optional, required = %v", s.InputSchema.Required)
	}
	if s.OutputSchema == nil || len(s.OutputSchema.Properties) != 3 {
		t.Errorf("output schema %v", s.OutputSchema)
	}
	if !strings.Contains(s.Description, "IANA") {
		t.Errorf("description %q", s.Description)
	}
}
