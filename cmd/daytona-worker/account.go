package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"strings"

	"github.com/daytonaworker/daytona-worker/daytona"
	"github.com/daytonaworker/daytona-worker/provider"
	"github.com/daytonaworker/daytona-worker/provider/config"
)

// accountHelp describes the config sources doctor and sweep share.
const accountHelp = `
Account (the same fields as an environment's config, later sources win):
  DAYTONA_API_KEY, DAYTONA_API_URL, DAYTONA_TARGET   environment variables
  --config FILE     a JSON file holding an environment config object
                    ({"apiKey": ..., "apiUrl": ..., "target": ..., ...})
  --api-url URL     Daytona API URL (default ` + daytona.DefaultAPIURL + `)
  --target REGION   Daytona region (default: the organization's)
There is deliberately no flag for the API key: a key on the command line
ends up in shell history and in every process listing.
`

// accountFlags are the config flags of doctor and sweep.
type accountFlags struct {
	file          string
	apiURL        string
	target        string
	snapshot      string
	image         string
	withSandboxes bool // snapshot and image flags (doctor)
}

func (a *accountFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.file, "config", "", "")
	fs.StringVar(&a.apiURL, "api-url", "", "")
	fs.StringVar(&a.target, "target", "", "")
	if a.withSandboxes {
		fs.StringVar(&a.snapshot, "snapshot", "", "")
		fs.StringVar(&a.image, "image", "", "")
	}
}

// maxConfigFile bounds the config file read: an environment config is a
// few hundred bytes.
const maxConfigFile = 1 << 20

// config merges the environment, the config file and the flags, in that
// order, into one environment config object. Errors never quote the
// file's content, which holds the key.
func (a *accountFlags) config(getenv func(string) string) (map[string]any, error) {
	cfg := map[string]any{}
	for env, key := range map[string]string{config.EnvAPIKey: "apiKey", "DAYTONA_API_URL": "apiUrl", "DAYTONA_TARGET": "target"} {
		if v := strings.TrimSpace(getenv(env)); v != "" {
			cfg[key] = v
		}
	}
	if a.file != "" {
		f, err := os.Open(a.file)
		if err != nil {
			return nil, usagef("--config: %v", err)
		}
		defer f.Close()
		var m map[string]any
		dec := json.NewDecoder(io.LimitReader(f, maxConfigFile))
		if err := dec.Decode(&m); err != nil || m == nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				return nil, usagef("--config %s: not valid JSON (at byte %d)", a.file, se.Offset)
			}
			return nil, usagef("--config %s: want one JSON object (an environment config)", a.file)
		}
		maps.Copy(cfg, m)
	}
	for key, v := range map[string]string{"apiUrl": a.apiURL, "target": a.target, "snapshot": a.snapshot, "image": a.image} {
		if v != "" {
			cfg[key] = v
		}
	}
	return cfg, nil
}

// configError is a config the worker's own validator refuses, with each
// of its messages (which never carry the key).
type configError struct{ errs []string }

func (e *configError) Error() string { return "invalid config: " + strings.Join(e.errs, "; ") }

// account is a validated config and the client the worker would build
// for it.
type account struct {
	raw    json.RawMessage
	cfg    config.Config
	client *daytona.Client
	driver *provider.Driver
	// http makes the doctor's own reads: the driver's transport, and no
	// redirects (one could carry the key to another host; the daytona
	// client refuses them too).
	http  *http.Client
	orgID string // the key's organization, once a listing showed it
}

// openAccount validates cfg exactly as environmentValidateConfig does and
// builds the worker's client for it. The process environment is already
// merged into cfg, so the driver reads no other.
func openAccount(cfg map[string]any) (*account, error) {
	if errs := config.Validate(cfg, nil); len(errs) > 0 {
		return nil, &configError{errs}
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	d := provider.New(provider.Options{Env: func(string) (string, bool) { return "", false }})
	client, parsed, err := d.Client(raw)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	hc := *d.HTTPClient() // the worker's transport, without following redirects
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &account{raw: raw, cfg: parsed, client: client, driver: d, http: &hc}, nil
}

// apiURL is the API URL the account talks to.
func (a *account) apiURL() string {
	if a.cfg.APIURL != "" {
		return a.cfg.APIURL
	}
	return daytona.DefaultAPIURL
}
