package tenant

import (
	"strconv"
	"sync"

	"github.com/rs/zerolog"
	"github.com/zricethezav/gitleaks/v8/detect"
	"github.com/zricethezav/gitleaks/v8/logging"
)

// gitleaks' rule set (about 200 maintained rules for cloud, SaaS and generic keys) is
// compiled once, on first use, and shared: building it takes a few hundred
// milliseconds, and a detector only reads its configuration while scanning strings, so
// one detector serves concurrent reconciles.
var (
	gitleaksOnce     sync.Once
	gitleaksDetector *detect.Detector
)

// minGitleaksLen skips short strings: no gitleaks rule matches a secret of fewer
// characters, and most values (info, true, 1.4.0, 500m) are short.
const minGitleaksLen = 8

func detector() *detect.Detector {
	gitleaksOnce.Do(func() {
		// gitleaks logs to stderr at info level through a package-level logger; a log
		// line about a finding could carry the secret, so it is silenced before use.
		logging.Logger = zerolog.Nop()
		d, err := detect.NewDetectorDefaultConfig()
		if err != nil {
			// The default configuration is compiled into gitleaks; it fails only on a
			// broken build. Eva's own rules still run without it.
			return
		}
		gitleaksDetector = d
	})
	return gitleaksDetector
}

// gitleaksReason scans a value with gitleaks. The value is written as an assignment to
// its key (key = "value"), the form gitleaks' context-sensitive rules look for, so a
// generic key under aws.key or client.token is found as it would be in source code.
func gitleaksReason(key, value string) string {
	if len(value) < minGitleaksLen {
		return ""
	}
	d := detector()
	if d == nil {
		return ""
	}
	for _, f := range d.DetectString(FoldKey(key) + " = " + strconv.Quote(value)) {
		return "matches the gitleaks rule " + f.RuleID
	}
	return ""
}
