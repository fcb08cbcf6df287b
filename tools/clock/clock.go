// Package clock provides the built-in get_current_time tool. Importing it, even blank,
// registers the tool in quiver.Default; this is the pattern every built-in follows:
//
//	import _ "github.com/quiverhq/quiver/tools/clock"
package clock

import (
	"context"
	"time"
	_ "time/tzdata" // the zone database travels with the binary, so zones resolve on any host

	"github.com/quiverhq/quiver"
)

// Args are the arguments of get_current_time.
type Args struct {
	Timezone string `json:"timezone,omitempty" description:"IANA time zone name, like Europe/Paris or America/New_York; UTC when omitted" maxLength:"64"`
}

// Now is the result of get_current_time.
type Now struct {
	Time     string `json:"time" description:"current time in RFC 3339 format, with the zone's offset"`
	Timezone string `json:"timezone" description:"the IANA zone the time is given in"`
	Unix     int64  `json:"unix" description:"seconds since 1970-01-01T00:00:00Z"`
}

// Tool is get_current_time. It is registered in quiver.Default when the package is imported.
var Tool = quiver.Func("get_current_time",
	"Returns the current date and time, in the given IANA time zone (UTC by default). Use it whenever the answer depends on today's date or the time of day.",
	currentTime)

// now is the clock; tests replace it.
var now = time.Now

func init() { quiver.MustRegister(Tool) }

func currentTime(_ context.Context, a Args) (Now, error) {
	zone := a.Timezone
	if zone == "" {
		zone = "UTC"
	}
	loc, err := time.LoadLocation(zone)
	if err != nil || zone == "Local" {
		return Now{}, quiver.Fail(quiver.CodeInvalidArguments,
			"timezone %q is not a known IANA time zone; use a name like UTC, Europe/Paris or America/New_York", a.Timezone)
	}
	t := now().In(loc)
	return Now{Time: t.Format(time.RFC3339), Timezone: loc.String(), Unix: t.Unix()}, nil
}
