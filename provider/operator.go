package provider

import (
	"encoding/json"
	"net/http"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/provider/config"
)

// What the operator commands (daytona-worker doctor and sweep) take from
// the driver: the account's client, built exactly as an environment
// method builds it.

// Client builds the Daytona client a call with this config would use, the
// way every environment method builds it (same key resolution, endpoint,
// region, HTTP client, retry and poll policy), for operator commands that
// talk to the account outside a lease (daytona-worker doctor and sweep).
func (d *Driver) Client(raw json.RawMessage) (*daytona.Client, config.Config, error) {
	c, err := d.resolveAccount(raw)
	if err != nil {
		return nil, config.Config{}, err
	}
	return c.client, c.cfg, nil
}

// HTTPClient is the HTTP client (transport and connection pool) every
// Daytona client of this driver uses, for an operator command's reads that
// the daytona client has no route for.
func (d *Driver) HTTPClient() *http.Client { return d.http }
