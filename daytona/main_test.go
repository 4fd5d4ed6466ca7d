package daytona

import (
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
)

// routeHits records which routes of the table the httptest fixture saw.
var routeHits sync.Map // *route -> true

// TestMain runs the tests under the live sweeper (live_test.go) and also proves, after a full run, that every confirmed route of
// the client's table was exercised against a server by some test (a
// listing, -list, runs none).
func TestMain(m *testing.M) {
	code := liveMain(m.Run, os.Getenv, os.Stderr)
	full := flag.Lookup("test.run").Value.String() == "" && flag.Lookup("test.skip").Value.String() == "" &&
		flag.Lookup("test.list").Value.String() == ""
	if code == 0 && full {
		var missing []string
		for _, rt := range allRoutes {
			if _, ok := routeHits.Load(rt); !ok && !rt.unconfirmed {
				missing = append(missing, rt.String()+" ("+rt.name+")")
			}
		}
		if len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "routes of the client's table no test exercised: %v\n", missing)
			code = 1
		}
	}
	os.Exit(code)
}
