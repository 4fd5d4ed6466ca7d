package provider

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNoRequestedExpiryMeansNoProviderCall(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil)
	require.Nil(t, l.ExpiresAt)
	require.Zero(t, e.srv.CountRequests("POST", "/sandbox/{sandboxIdOrName}/ttl/{interval}"))
}

func TestRequestedExpiryIsSetAtOrBeforeTheDeadline(t *testing.T) {
	e := newTestEnv(t, nil)
	deadline := time.Now().Add(30*time.Minute + 30*time.Second)
	l := e.acquire(nil, "requestedExpiresAt", deadline.Format(time.RFC3339))
	require.NotNil(t, l.ExpiresAt)
	at, err := time.Parse(time.RFC3339Nano, *l.ExpiresAt)
	require.NoError(t, err)
	require.False(t, at.After(deadline), "provider expiry %s after the deadline %s", at, deadline)
	require.WithinDuration(t, time.Now().Add(30*time.Minute), at, time.Minute, "rounded down to whole minutes")
	require.Equal(t, 1, e.srv.CountRequests("POST", "/sandbox/{sandboxIdOrName}/ttl/{interval}"))
}

func TestRequestedExpiryUnderAMinuteGivesNoExpiry(t *testing.T) {
	e := newTestEnv(t, nil)
	l := e.acquire(nil, "requestedExpiresAt", time.Now().Add(50*time.Second).Format(time.RFC3339))
	require.Nil(t, l.ExpiresAt, "the host then fails closed")
	require.Zero(t, e.srv.CountRequests("POST", "/sandbox/{sandboxIdOrName}/ttl/{interval}"))
}

func TestTTLMinutesSetAtCreationAndConfirmed(t *testing.T) {
	e := newTestEnv(t, map[string]any{"ttlMinutes": 45})
	l := e.acquire(nil)
	require.NotNil(t, l.ExpiresAt, "a configured lifetime is confirmed and reported")
	at, err := time.Parse(time.RFC3339Nano, *l.ExpiresAt)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(45*time.Minute), at, time.Minute)
	require.Zero(t, e.srv.CountRequests("POST", "/sandbox/{sandboxIdOrName}/ttl/{interval}"), "set in the create request")

	// A later caller deadline keeps the earlier creation expiry.
	later := e.acquire(nil, "requestedExpiresAt", time.Now().Add(3*time.Hour).Format(time.RFC3339))
	require.NotNil(t, later.ExpiresAt)
	at, _ = time.Parse(time.RFC3339Nano, *later.ExpiresAt)
	require.WithinDuration(t, time.Now().Add(45*time.Minute), at, time.Minute)

	// An earlier one still lowers it.
	earlier := e.acquire(nil, "requestedExpiresAt", time.Now().Add(10*time.Minute+30*time.Second).Format(time.RFC3339))
	at, _ = time.Parse(time.RFC3339Nano, *earlier.ExpiresAt)
	require.WithinDuration(t, time.Now().Add(10*time.Minute), at, time.Minute)
}

func TestInvalidTTLMinutesIsRejectedBeforeCreation(t *testing.T) {
	e := newTestEnv(t, map[string]any{"ttlMinutes": 1.5})
	require.ErrorContains(t, e.acquireErr(nil), "ttlMinutes")
	require.Zero(t, e.srv.CountRequests("POST", "/sandbox"))
}
