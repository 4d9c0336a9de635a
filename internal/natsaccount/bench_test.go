package natsaccount_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/aidonow/eva/internal/natsaccount"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// BenchmarkProvisionAccounts provisions 1,000 tenants' accounts as the operator does for
// each new tenant: an account key, its JWT with the tier's limits signed and pushed to
// the real server's full resolver, and the workloads' credentials. It reports, per
// tenant, the resolver round trips and the CPU of the whole process (client and the
// embedded server together: an upper bound of the operator's share).
func BenchmarkProvisionAccounts(b *testing.B) {
	const tenants = 1000
	n, err := testenv.RunNATSOperator(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer n.Server.Shutdown()
	sys, err := nats.Connect(n.URL, nats.UserCredentials(n.SystemCreds))
	if err != nil {
		b.Fatal(err)
	}
	defer sys.Close()
	resolver := &natsaccount.Resolver{Conn: sys}
	limits := natsaccount.LimitsOf(tenant.DefaultCatalog().Tiers["Starter"])
	ctx := context.Background()
	var cpu time.Duration
	pushes := 0
	b.ResetTimer()
	for i := range b.N {
		before := processCPU()
		for j := range tenants {
			code := fmt.Sprintf("B%05d", i*tenants+j)
			key, err := nkeys.CreateAccount()
			if err != nil {
				b.Fatal(err)
			}
			pub, _ := key.PublicKey()
			ac, err := natsaccount.Claims(code, pub, limits, nil)
			if err != nil {
				b.Fatal(err)
			}
			token, err := natsaccount.Sign(ac, n.OperatorSigner)
			if err != nil {
				b.Fatal(err)
			}
			if err := resolver.Push(ctx, token); err != nil {
				b.Fatal(err)
			}
			pushes++
			if _, _, err := natsaccount.User(code, "workloads", key, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
		cpu += processCPU() - before
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N*tenants), "cpu-ms/tenant")
	b.ReportMetric(float64(pushes)/float64(b.N*tenants), "resolver-requests/tenant")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N*tenants), "ms/tenant")
}

// processCPU is the process's user and system CPU so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
