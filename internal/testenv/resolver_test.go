package testenv

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOfflineResolverAnswersNXDOMAIN(t *testing.T) {
	_, err := OfflineResolver().LookupHost(context.Background(), "daytona.invalid")
	var de *net.DNSError
	require.True(t, errors.As(err, &de), "%v", err)
	require.True(t, de.IsNotFound, "%v", err)
}
