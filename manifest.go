// Package daytonaworker is the module root. It holds what the whole module
// shares: the plugin manifest, embedded so the binary, the npm package and the
// tests all read the same file.
package daytonaworker

import _ "embed"

// ManifestJSON is manifest.json, the single source of truth for the plugin
// manifest (its "current" profile). provider derives every profile from it.
//
//go:embed manifest.json
var ManifestJSON []byte
