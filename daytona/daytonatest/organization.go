package daytonatest

import (
	"net/http"
)

// The emulated organization's region and quotas (whole CPUs, GiB), what
// GET /organizations/{organizationId}/usage reports: every sandbox is in
// DefaultRegion unless created with a target, and usage counts started
// sandboxes (CPU, memory, disk) and stopped ones (disk), as Daytona does.
const (
	DefaultRegion = "us"
	quotaCPU      = 100
	quotaMemory   = 200
	quotaDisk     = 1000
)

// apiOrganizations is GET /organizations: the one organization an API key
// of the emulator belongs to.
func apiOrganizations(c *call) {
	writeJSON(c.w, http.StatusOK, []map[string]any{{
		"id": DefaultOrganizationID, "name": "daytonatest", "personal": true, "suspended": false,
		"defaultRegionId": DefaultRegion, "createdBy": "daytonatest",
		"createdAt": "2026-01-01T00:00:00.000Z", "updatedAt": "2026-01-01T00:00:00.000Z",
	}})
}

// apiOrganizationUsage is GET /organizations/{organizationId}/usage.
func apiOrganizationUsage(c *call) {
	if c.param("organizationId") != DefaultOrganizationID {
		c.apiErr(http.StatusForbidden, "Forbidden resource")
		return
	}
	type usage struct{ cpu, memory, disk int }
	regions := map[string]*usage{DefaultRegion: {}}
	c.s.mu.Lock()
	for _, id := range c.s.order {
		sb := c.s.sandboxes[id]
		u := regions[sb.target]
		if u == nil {
			u = &usage{}
			regions[sb.target] = u
		}
		switch sb.state {
		case StateStarted, StateStarting, StateStopping:
			u.cpu, u.memory, u.disk = u.cpu+sb.cpu, u.memory+sb.memory, u.disk+sb.disk
		case StateStopped:
			u.disk += sb.disk
		}
	}
	c.s.mu.Unlock()
	var out []map[string]any
	for region, u := range regions {
		out = append(out, map[string]any{"regionId": region,
			"totalCpuQuota": quotaCPU, "currentCpuUsage": u.cpu,
			"totalMemoryQuota": quotaMemory, "currentMemoryUsage": u.memory,
			"totalDiskQuota": quotaDisk, "currentDiskUsage": u.disk,
			"totalGpuQuota": 0, "currentGpuUsage": 0})
	}
	writeJSON(c.w, http.StatusOK, map[string]any{"regionUsage": out,
		"totalSnapshotQuota": 100, "currentSnapshotUsage": 0, "totalVolumeQuota": 100, "currentVolumeUsage": 0})
}
