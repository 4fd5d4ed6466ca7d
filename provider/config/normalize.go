package config

// Normalized is the normalizedConfig of environmentValidateConfig
// (docs/behavior.md#validation): the 17 keys of the reference, nulls included, in the reference's key
// order, plus ttlMinutes when set. Host-owned keys (runnerLifecycleMode,
// runnerIdleTimeoutMs, warmRunnerIdleTimeoutMs, streamRunLogs) are not
// echoed; timeoutMs, reuseLease and archiveOnRelease are, because the host
// does not re-apply them (docs/host.md#config).
//
// Its JSON encoding includes apiKey, as the reference's does: the host turns
// it into a company secret. It is the one type here that carries the key to
// the wire; fmt and slog output of it are redacted (redact.go).
type Normalized struct {
	APIKey   *string `json:"apiKey"`
	APIURL   *string `json:"apiUrl"`
	Target   *string `json:"target"`
	Snapshot *string `json:"snapshot"`
	Image    *string `json:"image"`
	Language *string `json:"language"`

	// Milliseconds, as configured or defaulted.
	TimeoutMs         int64 `json:"timeoutMs"`
	LivenessTimeoutMs int64 `json:"livenessTimeoutMs"`

	normalizedResources // cpu, memory, disk, gpu

	// Inactivity intervals in minutes.
	AutoStopInterval    int64 `json:"autoStopInterval"`
	AutoArchiveInterval int64 `json:"autoArchiveInterval"`
	AutoDeleteInterval  int64 `json:"autoDeleteInterval"`

	ReuseLease       bool   `json:"reuseLease"`
	ArchiveOnRelease bool   `json:"archiveOnRelease"`
	TTLMinutes       *int64 `json:"ttlMinutes,omitempty"`
}

// normalizedResources are the resources as normalizedConfig echoes them:
// null when not configured, where a create request's Resources omits them.
// Embedded, so that they keep their place in the key order.
type normalizedResources struct {
	CPU    *float64 `json:"cpu"`
	Memory *float64 `json:"memory"`
	Disk   *float64 `json:"disk"`
	GPU    *float64 `json:"gpu"`
}

// Normalize returns the normalizedConfig for c (defaults filled in). Call it
// on a config that passed Validate; ValidateAndNormalize does both.
func Normalize(c Config) Normalized {
	n := Normalized{
		TimeoutMs:           c.TimeoutMs,
		LivenessTimeoutMs:   c.LivenessTimeoutMs,
		AutoStopInterval:    c.AutoStopInterval,
		AutoArchiveInterval: c.AutoArchiveInterval,
		AutoDeleteInterval:  c.AutoDeleteInterval,
		ReuseLease:          c.ReuseLease,
		ArchiveOnRelease:    c.ArchiveOnRelease,
	}
	// An unset string is the reference's null.
	for _, s := range []struct {
		dst **string
		v   string
	}{{&n.APIKey, c.APIKey()}, {&n.APIURL, c.APIURL}, {&n.Target, c.Target}, {&n.Snapshot, c.Snapshot}, {&n.Image, c.Image}, {&n.Language, c.Language}} {
		if s.v != "" {
			*s.dst = new(s.v)
		}
	}
	// Resources are copied, so a Normalized never aliases the Config's
	// values, and -0 becomes 0 to match JSON.stringify.
	for _, r := range []struct {
		dst **float64
		v   *float64
	}{{&n.CPU, c.CPU}, {&n.Memory, c.Memory}, {&n.Disk, c.Disk}, {&n.GPU, c.GPU}} {
		if r.v != nil {
			v := *r.v
			if v == 0 {
				v = 0
			}
			*r.dst = new(v)
		}
	}
	if c.TTLMinutes > 0 && !c.ttlInvalid {
		n.TTLMinutes = new(c.TTLMinutes)
	}
	return n
}

// LeaseMetadata returns the config-derived keys of the lease metadata
// (docs/behavior.md#acquire): image and snapshot (null when unset), timeoutMs, reuseLease, each
// resource only when configured (test 51), and archiveOnRelease only when
// true (release rebuilds its config from the metadata). The values equal the
// normalized config's, so they JSON-equal the saved config the host compares
// them with for reuse matching (docs/host.md#lease). target is not included:
// metadata records the sandbox's actual target. Nothing host-owned and
// nothing secret is included. Each call returns a new map.
func LeaseMetadata(c Config) map[string]any {
	n := Normalize(c)
	m := map[string]any{
		"image":      nil,
		"snapshot":   nil,
		"timeoutMs":  n.TimeoutMs,
		"reuseLease": n.ReuseLease,
	}
	for key, v := range map[string]*string{"image": n.Image, "snapshot": n.Snapshot} {
		if v != nil {
			m[key] = *v
		}
	}
	for key, v := range map[string]*float64{"cpu": n.CPU, "memory": n.Memory, "disk": n.Disk, "gpu": n.GPU} {
		if v != nil {
			m[key] = *v
		}
	}
	if n.ArchiveOnRelease {
		m["archiveOnRelease"] = true
	}
	return m
}
