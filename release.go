// Package eva holds what a release of Eva carries besides its code: the environments
// (the tenant overlays of dev, prod and airgap) and the module charts. evactl embeds
// them, so that a fleet repository naming this release in its eva.yaml needs neither.
package eva

import "embed"

// Release is the released environments (overlays/<name>/tenant/) and module charts
// (charts/<name>/), at the paths they have in this repository.
//
//go:embed overlays/dev/tenant overlays/prod/tenant overlays/airgap/tenant all:charts
var Release embed.FS
