package hangar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	"github.com/zclconf/go-cty/cty/gocty"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
)

// requiredEnv are the variables each role cannot run without: the API's composition
// (composition.OpenFromEnv: the project, the blob store, the seal keyset and the host token, or
// sessions, secrets and webhooks answer unavailable; the public URL for sign-in's redirects and
// cookie origins) and `hangar host` (cmd/hangar/host.go refuses to start without the last three).
var requiredEnv = map[string][]string{
	"api":    {"GOOGLE_CLOUD_PROJECT", "HANGAR_BLOB_URL", "HANGAR_PUBLIC_URL", "HANGAR_SEAL_KEYSET", "HANGAR_HOST_TOKEN"},
	"worker": {"GOOGLE_CLOUD_PROJECT", "HANGAR_BLOB_URL", "HANGAR_PUBLIC_URL", "HANGAR_SEAL_KEYSET", "HANGAR_HOST_TOKEN"},
	"hosts":  {"GOOGLE_CLOUD_PROJECT", "HANGAR_BLOB_URL", "HANGAR_SEAL_KEYSET", "HANGAR_HOST_TOKEN"},
}

// warmFunctions answer people and senders who give up on a cold start: sign-in (/api/auth is
// ApiKeyService's) and inbound webhooks.
var warmFunctions = []string{appv1connect.ApiKeyServiceName, appv1connect.WebhookRegistrationServiceName}

// The Terraform module in deploy/ declares what the code uses.
func TestDeployMatchesCode(t *testing.T) {
	for _, p := range deployProblems(t, "deploy", "firestore.indexes.json") {
		t.Error(p)
	}
}

// The checker finds each kind of drift between deploy/ and the code, in a mutated copy.
func TestDeployCheckerFindsDrift(t *testing.T) {
	for _, tc := range []struct {
		name, file, old, new string
		want                 string // in one of the problems
	}{
		{"a function without its settings", "functions.tf", `"hangar-review-service"`, `"hangar-reviews"`, "hangar-review-service has no function_settings"},
		{"a wrong entry point", "hangar.gen.tf.json", `"entry_point": "TaskService"`, `"entry_point": "Tasks"`, "stale"},
		{"a function missing from the generated list", "hangar.gen.tf.json", `"hangar-dashboard": {`, `"hangar-dash": {`, "stale"},
		{"a function resource not built from the list", "functions.tf", "function_target          = each.value.entry_point", `function_target          = "TaskService"`, "function_target"},
		{"the functions not created per entry", "functions.tf", "for_each            = local.hangar.functions", "for_each            = {}", "google_cloud_run_v2_service.function"},
		{"a streaming service below 3600 s", "functions.tf", "timeout_seconds = 3600, concurrency = 250", "timeout_seconds = 300, concurrency = 250", "streaming"},
		{"a concurrency of 1", "functions.tf", `"hangar-task-service"                 = { timeout_seconds = 300, concurrency = 80`, `"hangar-task-service"                 = { timeout_seconds = 300, concurrency = 1`, "concurrency 1"},
		{"sign-in without a warm instance", "functions.tf", `concurrency = 80, cpu = "1", memory = "512Mi", min_instances = 1, max_instances = 10`, `concurrency = 80, cpu = "1", memory = "512Mi", min_instances = 0, max_instances = 10`, "min_instances"},
		{"a role's required variable not set", "functions.tf", "HANGAR_BLOB_URL      = \"gs://${google_storage_bucket.blobs.name}\"\n    HANGAR_PUBLIC_URL", "HANGAR_PUBLIC_URL", "HANGAR_BLOB_URL"},
		{"a host variable not set", "hosts.tf", "GOOGLE_CLOUD_PROJECT = var.project_id", "", "hosts: GOOGLE_CLOUD_PROJECT"},
		{"the worker reachable from the load balancer", "functions.tf", `"INGRESS_TRAFFIC_INTERNAL_ONLY"`, `"INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER"`, "ingress"},
		{"functions not admitted to the hosts", "network.tf", `source_tags = ["hangar-functions"]`, `source_tags = ["hangar-fns"]`, "source_tags"},
		{"a topic not declared", "pubsub.tf", "toset(local.hangar.topics)", `toset(["hangar-automation-events"])`, "google_pubsub_topic.topic"},
		{"a subscription not declared", "pubsub.tf", "for_each             = local.hangar.subscriptions", "for_each             = {}", "google_pubsub_subscription.sub"},
		{"a push endpoint not the code's", "pubsub.tf", "${local.worker_url}${push_config.value.push_path}", "${local.worker_url}/push", "push_endpoint"},
		{"push without OIDC", "pubsub.tf", "oidc_token {", "no_token {", "oidc_token"},
		{"no dead-letter policy", "pubsub.tf", `dynamic "dead_letter_policy"`, `dynamic "dead_letters"`, "dead_letter_policy"},
		{"a composite index missing", "firestore.tf", `try(f.order, f.arrayConfig)}"])) => i`, `try(f.order, f.arrayConfig)}"])) => i if i.collectionGroup != "tasks"`, "declares"},
		{"a TTL field missing", "hangar.gen.tf.json", `"rateLimits": "expire_at",`, ``, "stale"},
		{"TTL policies not declared", "firestore.tf", "for_each   = local.hangar.ttl", "for_each   = {}", "google_firestore_field.ttl"},
		{"path rules written by hand", "lb.tf", "for_each = local.hangar.path_rules", `for_each = [{ paths = ["/rpc/*"], function = "hangar-task-service" }]`, "path_rule"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files, err := filepath.Glob("deploy/*")
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if filepath.Base(f) == tc.file {
					if !bytes.Contains(b, []byte(tc.old)) {
						t.Fatalf("%s has no %q to mutate", f, tc.old)
					}
					b = bytes.Replace(b, []byte(tc.old), []byte(tc.new), 1)
				}
				if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			problems := deployProblems(t, dir, "firestore.indexes.json")
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("no problem mentions %q; problems: %q", tc.want, problems)
			}
		})
	}
}

// deployProblems parses the Terraform module in dir with HCL and answers where it disagrees
// with the code: the generated file is stale, a resource does not declare what the generated
// file lists, or a chosen setting breaks a rule (streaming timeouts, concurrency, warm
// instances, required variables, ingress).
func deployProblems(t *testing.T, dir, indexesFile string) []string {
	t.Helper()
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	want, err := composition.TerraformJSON()
	if err != nil {
		t.Fatal(err)
	}
	gen := filepath.Join(dir, "hangar.gen.tf.json")
	if got, err := os.ReadFile(gen); err != nil || !bytes.Equal(got, want) {
		fail("%s is stale (%v): run go run ./cmd/hangar functions --terraform > deploy/hangar.gen.tf.json", gen, err)
	}
	d, err := composition.Deploy()
	if err != nil {
		t.Fatal(err)
	}

	m, diags := parseModule(dir)
	if diags.HasErrors() {
		fail("parse %s: %s", dir, diags.Error())
		return problems
	}
	hangarVal, err := jsonToCty(want)
	if err != nil {
		t.Fatal(err)
	}
	settings, ok := m.evalLocal("function_settings", nil)
	if !ok {
		fail("locals: no function_settings")
		return problems
	}

	// The functions: one Cloud Run service per entry, built with its entry point, with the
	// settings the rules ask for.
	run := m.resource("google_cloud_run_v2_service", "function")
	m.wantText(run, "for_each", "local.hangar.functions", fail)
	m.wantText(run, "build_config.function_target", "each.value.entry_point", fail)
	m.wantText(run, "template.containers.dynamic.env[0].for_each", "local.role_env[each.value.role]", fail)
	m.wantText(run, "template.containers.dynamic.env[1].for_each", "local.role_secrets[each.value.role]", fail)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range d.Functions {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		fn := d.Functions[name]
		if !settings.Type().IsObjectType() || !settings.Type().HasAttribute(name) {
			fail("function %s has no function_settings entry", name)
			continue
		}
		each := cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal(name), "value": fnVal(fn)})
		vars := map[string]cty.Value{
			"each":  each,
			"local": cty.ObjectVal(map[string]cty.Value{"function_settings": settings, "hangar": hangarVal}),
		}
		timeout, _ := m.evalString(run, "template.timeout", vars)
		concurrency, _ := m.evalInt(run, "template.max_instance_request_concurrency", vars)
		minInstances, _ := m.evalInt(run, "template.scaling.min_instance_count", vars)
		ingress, _ := m.evalString(run, "ingress", vars)
		var secs int
		if _, err := fmt.Sscanf(timeout, "%ds", &secs); err != nil {
			fail("function %s: timeout %q is not in seconds", name, timeout)
		}
		if fn.Streaming && secs < 3600 {
			fail("function %s is streaming but its timeout is %ds, under 3600 s", name, secs)
		}
		if concurrency <= 1 {
			fail("function %s has concurrency %d; one request per instance wastes instances", name, concurrency)
		}
		if slices.Contains(warmFunctions, fn.Service) && minInstances < 1 {
			fail("function %s needs min_instances >= 1 (a warm instance), has %d", name, minInstances)
		}
		wantIngress := "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER"
		if !fn.Public {
			wantIngress = "INGRESS_TRAFFIC_INTERNAL_ONLY"
		}
		if ingress != wantIngress {
			fail("function %s has ingress %q, want %q", name, ingress, wantIngress)
		}
	}
	for name := range settings.Type().AttributeTypes() {
		if _, ok := d.Functions[name]; !ok {
			fail("function_settings has %s, which is no function of the code", name)
		}
	}

	// Each role's required variables, plain or from Secret Manager.
	for role, vars := range requiredEnv {
		var set []string
		if role == "hosts" {
			set = append(m.localKeys("host_env", ""), m.localKeys("host_secrets", "")...)
		} else {
			set = append(m.localKeys("role_env", role), m.localKeys("role_secrets", role)...)
		}
		for _, v := range vars {
			if !slices.Contains(set, v) {
				fail("%s: %s is not set (it has %v)", role, v, set)
			}
		}
	}
	host := m.resource("google_compute_instance_template", "host")
	if expr := m.expr(host, "metadata"); expr == nil || !strings.Contains(m.text(expr), "local.host_env") || !strings.Contains(m.text(expr), "local.host_secrets") {
		fail("google_compute_instance_template.host: the startup script is not given local.host_env and local.host_secrets")
	}

	// The network: the functions' Direct VPC egress carries the tag the firewall admits to the
	// hosts' API port, which is the port the hosts serve and are health-checked on.
	m.wantText(run, "template.dynamic.vpc_access.content.network_interfaces.tags", `["hangar-functions"]`, fail)
	fw := m.resource("google_compute_firewall", "functions_to_hosts")
	m.wantText(fw, "source_tags", `["hangar-functions"]`, fail)
	m.wantText(fw, "target_tags", `["hangar-host"]`, fail)
	m.wantText(fw, "allow.ports", "[tostring(local.host_port)]", fail)
	m.wantText(host, "tags", `["hangar-host"]`, fail)
	m.wantText(m.resource("google_compute_health_check", "host"), "tcp_health_check.port", "local.host_port", fail)

	// Pub/Sub: every topic and subscription of the code, with its policies and push endpoint.
	m.wantText(m.resource("google_pubsub_topic", "topic"), "for_each", "toset(local.hangar.topics)", fail)
	sub := m.resource("google_pubsub_subscription", "sub")
	m.wantText(sub, "for_each", "local.hangar.subscriptions", fail)
	m.wantText(sub, "ack_deadline_seconds", "each.value.ack_deadline_seconds", fail)
	m.wantText(sub, "dynamic.retry_policy.content.minimum_backoff", "retry_policy.value.minimum_backoff", fail)
	m.wantText(sub, "dynamic.dead_letter_policy.content.max_delivery_attempts", "dead_letter_policy.value.max_delivery_attempts", fail)
	m.wantText(sub, "dynamic.push_config.content.push_endpoint", `"${local.worker_url}${push_config.value.push_path}"`, fail)
	m.wantText(sub, "dynamic.push_config.content.oidc_token.service_account_email", `google_service_account.role["push"].email`, fail)
	m.wantText(m.resource("google_pubsub_topic_iam_member", "agent_publishes_dead_letters"), "member", "local.pubsub_agent", fail)
	m.wantText(m.resource("google_pubsub_subscription_iam_member", "agent_forwards_dead_letters"), "member", "local.pubsub_agent", fail)
	m.wantText(m.resource("google_cloud_scheduler_job", "tick"), "http_target.uri", `"${local.worker_url}${local.hangar.tick_path}"`, fail)

	// Firestore: every composite index of the index file, and a TTL policy per expiring field.
	indexes, err := os.ReadFile(indexesFile)
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Indexes []json.RawMessage }
	if err := json.Unmarshal(indexes, &file); err != nil {
		t.Fatal(err)
	}
	idx := m.resource("google_firestore_index", "composite")
	if keys, err := m.forEachKeys(idx, indexesFile); err != nil {
		fail("google_firestore_index.composite: %v", err)
	} else if len(keys) != len(file.Indexes) {
		fail("google_firestore_index.composite declares %d indexes, %s has %d", len(keys), indexesFile, len(file.Indexes))
	}
	ttl := m.resource("google_firestore_field", "ttl")
	m.wantText(ttl, "for_each", "local.hangar.ttl", fail)
	if ttl != nil && m.block(ttl.Body, "ttl_config") == nil {
		fail("google_firestore_field.ttl has no ttl_config")
	}

	// The load balancer: the URL map's path rules are the generated ones.
	um := m.resource("google_compute_url_map", "hangar")
	m.wantText(um, "path_matcher.dynamic.path_rule.for_each", "local.hangar.path_rules", fail)
	m.wantText(um, "path_matcher.dynamic.path_rule.content.service", "google_compute_backend_service.function[path_rule.value.function].id", fail)
	m.wantText(um, "default_service", "google_compute_backend_service.function[local.hangar.default_function].id", fail)
	sort.Strings(problems)
	return problems
}

// module is a parsed Terraform module: its files' bodies and sources.
type module struct {
	bodies []*hclsyntax.Body
	src    map[string][]byte // by file name
	locals map[string]hcl.Expression
}

func parseModule(dir string) (*module, hcl.Diagnostics) {
	p := hclparse.NewParser()
	m := &module{src: map[string][]byte{}, locals: map[string]hcl.Expression{}}
	files, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
	var diags hcl.Diagnostics
	for _, f := range files {
		hf, d := p.ParseHCLFile(f)
		diags = append(diags, d...)
		if hf == nil {
			continue
		}
		m.src[f] = hf.Bytes
		body := hf.Body.(*hclsyntax.Body)
		m.bodies = append(m.bodies, body)
		for _, b := range body.Blocks {
			if b.Type == "locals" {
				for name, a := range b.Body.Attributes {
					m.locals[name] = a.Expr
				}
			}
		}
	}
	// The generated file must at least be valid Terraform JSON.
	if _, d := p.ParseJSONFile(filepath.Join(dir, "hangar.gen.tf.json")); d.HasErrors() {
		diags = append(diags, d...)
	}
	return m, diags
}

func (m *module) resource(typ, name string) *hclsyntax.Block {
	for _, body := range m.bodies {
		for _, b := range body.Blocks {
			if b.Type == "resource" && len(b.Labels) == 2 && b.Labels[0] == typ && b.Labels[1] == name {
				return b
			}
		}
	}
	return nil
}

// block is body's nested block of typ; "dynamic.X" is the content of dynamic "X" and a suffix
// [i] picks the i-th of several.
func (m *module) block(body *hclsyntax.Body, typ string) *hclsyntax.Body {
	n := 0
	if i := strings.Index(typ, "["); i >= 0 {
		fmt.Sscanf(typ[i:], "[%d]", &n)
		typ = typ[:i]
	}
	for _, b := range body.Blocks {
		if b.Type == typ {
			if n == 0 {
				return b.Body
			}
			n--
		}
	}
	return nil
}

// expr is the attribute at path in r: blocks separated by dots, then the attribute's name.
func (m *module) expr(r *hclsyntax.Block, path string) hclsyntax.Expression {
	if r == nil {
		return nil
	}
	parts := strings.Split(path, ".")
	body := r.Body
	for i := 0; i < len(parts)-1 && body != nil; i++ {
		if parts[i] == "dynamic" {
			i++
			dyn := m.dynamic(body, parts[i])
			if dyn == nil {
				return nil
			}
			if i+1 < len(parts)-1 && parts[i+1] == "content" {
				i++
				body = m.block(dyn, "content")
			} else {
				body = dyn
			}
			continue
		}
		body = m.block(body, parts[i])
	}
	if body == nil {
		return nil
	}
	a, ok := body.Attributes[parts[len(parts)-1]]
	if !ok {
		return nil
	}
	return a.Expr
}

// dynamic is the body of the dynamic block labelled label ("env[1]": the second of them).
func (m *module) dynamic(body *hclsyntax.Body, label string) *hclsyntax.Body {
	n := 0
	if i := strings.Index(label, "["); i >= 0 {
		fmt.Sscanf(label[i:], "[%d]", &n)
		label = label[:i]
	}
	for _, b := range body.Blocks {
		if b.Type == "dynamic" && len(b.Labels) == 1 && b.Labels[0] == label {
			if n == 0 {
				return b.Body
			}
			n--
		}
	}
	return nil
}

func (m *module) text(e hclsyntax.Expression) string {
	r := e.Range()
	return strings.Join(strings.Fields(string(m.src[r.Filename][r.Start.Byte:r.End.Byte])), " ")
}

func (m *module) wantText(r *hclsyntax.Block, path, want string, fail func(string, ...any)) {
	if r == nil {
		fail("a resource is missing (want %s = %s)", path, want)
		return
	}
	name := r.Labels[0] + "." + r.Labels[1]
	e := m.expr(r, path)
	if e == nil {
		fail("%s: no %s", name, path)
		return
	}
	if got := m.text(e); got != want {
		fail("%s: %s is %s, want %s", name, path, got, want)
	}
}

var hclFunctions = map[string]function.Function{
	"concat": stdlib.ConcatFunc, "join": stdlib.JoinFunc, "jsondecode": stdlib.JSONDecodeFunc,
	"merge": stdlib.MergeFunc, "coalesce": stdlib.CoalesceFunc, "try": tryfunc.TryFunc,
}

func (m *module) eval(e hclsyntax.Expression, vars map[string]cty.Value) (cty.Value, error) {
	v, diags := e.Value(&hcl.EvalContext{Variables: vars, Functions: hclFunctions})
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	return v, nil
}

func (m *module) evalLocal(name string, vars map[string]cty.Value) (cty.Value, bool) {
	e, ok := m.locals[name]
	if !ok {
		return cty.NilVal, false
	}
	v, err := m.eval(e.(hclsyntax.Expression), vars)
	return v, err == nil
}

func (m *module) evalString(r *hclsyntax.Block, path string, vars map[string]cty.Value) (string, error) {
	e := m.expr(r, path)
	if e == nil {
		return "", fmt.Errorf("no %s", path)
	}
	v, err := m.eval(e, vars)
	if err != nil || v.Type() != cty.String || !v.IsKnown() {
		return "", fmt.Errorf("%s: %v", path, err)
	}
	return v.AsString(), nil
}

func (m *module) evalInt(r *hclsyntax.Block, path string, vars map[string]cty.Value) (int, error) {
	e := m.expr(r, path)
	if e == nil {
		return 0, fmt.Errorf("no %s", path)
	}
	v, err := m.eval(e, vars)
	if err != nil {
		return 0, err
	}
	var n int
	return n, gocty.FromCtyValue(v, &n)
}

// forEachKeys evaluates r's for_each with local.firestore_indexes read from indexesFile.
func (m *module) forEachKeys(r *hclsyntax.Block, indexesFile string) ([]string, error) {
	b, err := os.ReadFile(indexesFile)
	if err != nil {
		return nil, err
	}
	file, err := jsonToCty(b)
	if err != nil {
		return nil, err
	}
	e := m.expr(r, "for_each")
	if e == nil {
		return nil, fmt.Errorf("no for_each")
	}
	v, err := m.eval(e, map[string]cty.Value{"local": cty.ObjectVal(map[string]cty.Value{"firestore_indexes": file})})
	if err != nil {
		return nil, err
	}
	if !v.CanIterateElements() {
		return nil, fmt.Errorf("for_each is not a map")
	}
	var keys []string
	for k := range v.AsValueMap() {
		keys = append(keys, k)
	}
	return keys, nil
}

// localKeys are the keys of local name (of its attribute sub, when sub is not ""), following
// references to other locals and merge's object arguments; what the keys map to is not read.
func (m *module) localKeys(name, sub string) []string {
	e, ok := m.locals[name]
	if !ok {
		return nil
	}
	expr := e.(hclsyntax.Expression)
	if sub != "" {
		obj, ok := expr.(*hclsyntax.ObjectConsExpr)
		if !ok {
			return nil
		}
		expr = nil
		for _, item := range obj.Items {
			if k, err := m.eval(item.KeyExpr, nil); err == nil && k.Type() == cty.String && k.AsString() == sub {
				expr = item.ValueExpr
			}
		}
	}
	return m.keys(expr)
}

func (m *module) keys(e hclsyntax.Expression) []string {
	switch e := e.(type) {
	case *hclsyntax.ObjectConsExpr:
		var out []string
		for _, item := range e.Items {
			if k, err := m.eval(item.KeyExpr, nil); err == nil && k.Type() == cty.String {
				out = append(out, k.AsString())
			}
		}
		return out
	case *hclsyntax.FunctionCallExpr:
		var out []string
		if e.Name == "merge" {
			for _, a := range e.Args {
				out = append(out, m.keys(a)...)
			}
		}
		return out
	case *hclsyntax.ScopeTraversalExpr:
		if len(e.Traversal) == 2 && e.Traversal.RootName() == "local" {
			if attr, ok := e.Traversal[1].(hcl.TraverseAttr); ok {
				return m.localKeys(attr.Name, "")
			}
		}
	}
	return nil
}

func fnVal(fn composition.DeployedFunction) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{
		"entry_point": cty.StringVal(fn.EntryPoint), "service": cty.StringVal(fn.Service),
		"public": cty.BoolVal(fn.Public), "role": cty.StringVal(fn.Role), "streaming": cty.BoolVal(fn.Streaming),
	})
}

// jsonToCty is a JSON document as HCL's jsondecode reads it; for the generated file, its local.
func jsonToCty(b []byte) (cty.Value, error) {
	v, err := stdlib.JSONDecode(cty.StringVal(string(b)))
	if err != nil {
		return cty.NilVal, err
	}
	if v.Type().IsObjectType() && v.Type().HasAttribute("locals") {
		return v.GetAttr("locals").GetAttr("hangar"), nil
	}
	return v, nil
}
