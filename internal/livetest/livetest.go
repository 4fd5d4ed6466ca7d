// Package livetest gates the live test tier, the tests that run against
// real Daytona and start billable sandboxes: they run only with
// DAYTONA_LIVE=1 (`make live`), fail when that is set without
// DAYTONA_API_KEY, and skip with a clear message otherwise. The provider
// and daytona live suites use it; it imports nothing of the module, so any
// package's tests can.
package livetest

import (
	"errors"
	"os"
	"strconv"
	"testing"
)

// The live tier's switches: DAYTONA_LIVE=1 opts in (`make live` sets it);
// the key and the optional URL, region and snapshot select the account.
const (
	Env              = "DAYTONA_LIVE"
	KeyEnv           = "DAYTONA_API_KEY"
	URLEnv           = "DAYTONA_API_URL"
	TargetEnv        = "DAYTONA_TARGET"
	SnapshotEnv      = "DAYTONA_TEST_SNAPSHOT"
	CapacityEnv      = "DAYTONA_LIVE_CAPACITY"
	liveSkipMessage  = "live Daytona tier (starts billable sandboxes): run `make live`, or set DAYTONA_LIVE=1 and DAYTONA_API_KEY"
	defaultLiveCount = 3
)

// ErrNoKey: the live tier was asked for without a key. That fails the
// tests instead of skipping them, so a CI job that opted in cannot pass
// green without having run anything.
var ErrNoKey = errors.New("DAYTONA_LIVE=1 but DAYTONA_API_KEY is not set: the live tier cannot run")

// Account is the live tier's account, read from the environment.
type Account struct {
	APIKey, APIURL, Target, Snapshot string
}

// Gate decides the live tier from getenv alone (os.Getenv in the
// suite): skip is a reason to skip when DAYTONA_LIVE is not "1"; err is
// ErrNoKey when it is "1" without a key; otherwise the account.
// Exporting DAYTONA_API_KEY alone never starts a sandbox.
func Gate(getenv func(string) string) (l Account, skip string, err error) {
	if getenv(Env) != "1" {
		return Account{}, liveSkipMessage, nil
	}
	l = Account{APIKey: getenv(KeyEnv), APIURL: getenv(URLEnv), Target: getenv(TargetEnv), Snapshot: getenv(SnapshotEnv)}
	if l.APIKey == "" {
		return Account{}, "", ErrNoKey
	}
	return l, "", nil
}

// Require gates a live test: it skips with a clear message unless
// DAYTONA_LIVE=1, fails when that is set without DAYTONA_API_KEY, and
// otherwise returns the account.
func Require(tb testing.TB) Account {
	tb.Helper()
	l, skip, err := Gate(os.Getenv)
	switch {
	case err != nil:
		tb.Fatal(err)
	case skip != "":
		tb.Skip(skip)
	}
	return l
}

// Capacity is how many sandboxes the capacity regression acquires at
// once: DAYTONA_LIVE_CAPACITY, default 3. A value that is not a positive
// whole number is an error, not a silent default.
func Capacity(getenv func(string) string) (int, error) {
	v := getenv(CapacityEnv)
	if v == "" {
		return defaultLiveCount, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, errors.New(CapacityEnv + " must be a positive whole number")
	}
	return n, nil
}
