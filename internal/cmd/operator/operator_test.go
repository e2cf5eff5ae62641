package operator

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/pmx-dev/pmx/internal/k8stest"
	"github.com/pmx-dev/pmx/internal/poll"
)

// TestPoolAccess asks a real API server whether an operator's service account may manage
// ShardPools' objects in its namespace: without a Role it may not (and the operator then runs no
// pool rather than fail to start), with config/rbac's Role, generated from the reconciler's
// markers, it may do all that poolAccess asks.
func TestPoolAccess(t *testing.T) {
	env := k8stest.Start(t)
	ctx := t.Context()
	const ns = "pmx-system"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":pmx-operator"}
	operator, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	denied, err := poolAccess(ctx, operator, ns)
	if err != nil || len(denied) != 16 {
		t.Fatalf("with no Role: denied %v (%v), want all 16 permissions", denied, err)
	}

	var role *rbacv1.Role
	data, err := os.ReadFile(filepath.Join(k8stest.RepoRoot(t), "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var r rbacv1.Role
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind == "Role" {
			role = &r
		}
	}
	if role == nil || role.Namespace != ns {
		t.Fatalf("config/rbac/role.yaml has no Role in %s: %+v", ns, role)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pmx-operator", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "pmx-operator", Namespace: ns}}}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	// The API server's authorizer learns of the Role and its binding from its informers, a moment
	// after they are stored: ask until it answers for them.
	var denied2 []string
	if err := poll.Until(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		denied2, err = poolAccess(ctx, operator, ns)
		return err == nil && len(denied2) == 0, err
	}); err != nil {
		t.Errorf("with config/rbac's Role: denied %v (%v), want none", denied2, err)
	}
	if denied, err := poolAccess(ctx, operator, "elsewhere"); err != nil || !slices.Contains(denied, "list statefulsets") {
		t.Errorf("in another namespace: denied %v (%v), want list statefulsets among them", denied, err)
	}
}
