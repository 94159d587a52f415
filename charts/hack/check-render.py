#!/usr/bin/python3
"""Checks one `helm template` output of charts/allocating-webhook against facts derived from the
values it was rendered with, from manifests/ (the kustomize install it must match) and from the
binary's --help (the flags it accepts).

  charts/hack/check-render.py RENDERED.yaml VALUES.yaml HELP.txt NAMESPACE [GATEWAY-HELP.txt]

GATEWAY-HELP.txt is allocation-gateway --help, needed when the values enable the gateway (its
objects are then checked against manifests/components/gateway and that --help).

VALUES.yaml is the ci/ file the render used (merged here over the chart's values.yaml the way Helm
merges: maps deep, a null removes the key). Prints one line per failed fact and exits 1 when any
failed, 0 (with a count of facts checked) otherwise.
"""
import base64
import copy
import ipaddress
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHART = os.path.join(ROOT, "charts", "allocating-webhook")

# Flags the chart sets for the gateway from values other than .Values.gateway.flags.
GATEWAY_CHART_FLAGS = {"port", "health-port", "tls-cert-file", "tls-key-file", "client-ca-file", "client-ca-dir",
                       "disable-mtls",
                       "allocator-address", "allocator-client-cert-file", "allocator-client-key-file",
                       "allocator-ca-file"}

# Flags the chart sets from values other than .Values.flags.
CHART_FLAGS = {"port", "health-port", "tls-cert-file", "tls-key-file", "trusted-users",
               "agones-controller-users", "sdk-service-account", "autoscale-buffer"}

failures = []
checked = 0


def fact(ok, what):
    global checked
    checked += 1
    if not ok:
        failures.append(what)
    return ok


def merge(base, over):
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def openssl_text(pem_path):
    return subprocess.run(["openssl", "x509", "-noout", "-text", "-in", pem_path],
                          capture_output=True, text=True, check=True).stdout


def help_flags(path):
    with open(path) as f:
        text = f.read()
    names = set(re.findall(r"^\s+--([a-z0-9-]+)\s*$", text, re.M))
    # --help and --version are actions of the command line, not settings a Deployment passes.
    names.discard("help")
    names.discard("version")
    if len(names) < 10:
        sys.exit(f"check-render: {path} lists {len(names)} flags: not the binary's --help output")
    return names


def parse_args(args, known, label, binary):
    """The (flag, value) pairs of a container's `--flag=value` args; a fact for each arg that is not
    of that form or names a flag the binary's --help does not list."""
    parsed = []
    for a in args:
        m = re.fullmatch(r"--([a-z0-9-]+)=(.*)", a, re.S)
        if fact(m is not None, f"{label}arg {a!r} is not --flag=value"):
            parsed.append((m.group(1), m.group(2)))
    for n, _ in parsed:
        fact(n in known, f"{label}arg --{n} is not a flag of {binary} (--help)")
    return parsed


def one(objs, kind, name=None):
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    fact(len(found) == 1, f"want exactly one {kind} {name or ''}, got {len(found)}")
    return found[0] if found else None


def none_of(objs, kind):
    fact(not [o for o in objs if o["kind"] == kind], f"no {kind} expected")


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    rendered, values_file, help_file, ns = sys.argv[1:5]
    gateway_help = sys.argv[5] if len(sys.argv) == 6 else None
    with open(os.path.join(CHART, "values.yaml")) as f:
        defaults = yaml.safe_load(f)
    with open(values_file) as f:
        v = merge(defaults, yaml.safe_load(f) or {})
    flags_known = help_flags(help_file)
    objs = load_docs(rendered)
    name = v.get("fullnameOverride") or "allocating-webhook"
    # The gateway's objects carry its own name label; they are checked apart (check_gateway).
    gwname = v["gateway"]["name"]
    gw_objs = [o for o in objs if (o["metadata"].get("labels") or {}).get("app.kubernetes.io/name") == gwname]
    objs = [o for o in objs if o not in gw_objs]
    secret_name = v["certs"].get("secretName") or f"{name}-tls"

    base = {}
    for fn in os.listdir(os.path.join(ROOT, "manifests", "base")):
        if fn.endswith(".yaml") and fn != "kustomization.yaml":
            for d in load_docs(os.path.join(ROOT, "manifests", "base", fn)):
                base[d["kind"]] = base.get(d["kind"], []) + [d]

    # Every flag of the binary is a value (or set by the chart), and every value names a flag.
    fact(set(defaults["flags"]) | CHART_FLAGS == flags_known,
         f"values.flags + chart-set flags != --help flags: missing {sorted(flags_known - set(defaults['flags']) - CHART_FLAGS)}, "
         f"unknown {sorted((set(defaults['flags']) | CHART_FLAGS) - flags_known)}")

    cluster_kinds = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
                     "ValidatingWebhookConfiguration", "Namespace"}
    for o in objs:
        md = o["metadata"]
        if o["kind"] in cluster_kinds:
            fact("namespace" not in md, f"{o['kind']} {md['name']} is cluster-scoped but has a namespace")
        else:
            fact(md.get("namespace") == ns, f"{o['kind']} {md['name']} namespace {md.get('namespace')!r}, want {ns!r}")
        fact(md.get("labels", {}).get("app.kubernetes.io/name") == name, f"{o['kind']} {md['name']}: name label")

    # --- Deployment --------------------------------------------------------------------------------
    dep = one(objs, "Deployment", name)
    bdep = base["Deployment"][0]
    pod = dep["spec"]["template"]["spec"]
    bpod = bdep["spec"]["template"]["spec"]
    fact(dep["spec"]["replicas"] == v["replicas"], f"replicas {dep['spec']['replicas']} != {v['replicas']}")
    fact(dep["spec"]["strategy"] == bdep["spec"]["strategy"], "strategy differs from manifests/base")
    fact(pod["securityContext"] == bpod["securityContext"], "pod securityContext differs from manifests/base")
    fact(pod["securityContext"].get("runAsUser") == 65532 and pod["securityContext"].get("runAsNonRoot") is True,
         "pod does not run as non-root 65532")
    fact(pod["serviceAccountName"] == name, "serviceAccountName")
    c = pod["containers"][0]
    bc = bpod["containers"][0]
    sc = c["securityContext"]
    fact(sc.get("runAsUser") == 65532 and sc.get("runAsNonRoot") is True, "container does not run as 65532")
    fact(sc.get("readOnlyRootFilesystem") is True, "container root file system is not read-only")
    fact(sc.get("allowPrivilegeEscalation") is False and sc.get("capabilities", {}).get("drop") == ["ALL"]
         and sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", "container not Pod Security restricted")
    for key in ("env", "ports", "livenessProbe", "readinessProbe", "volumeMounts", "resources", "securityContext"):
        fact(c.get(key) == bc.get(key), f"container {key} differs from manifests/base")
    vols = {x["name"]: x for x in pod["volumes"]}
    fact(vols.get("tls", {}).get("secret", {}).get("secretName") == secret_name, "tls volume does not mount the Secret")
    fact(pod["terminationGracePeriodSeconds"] == v["terminationGracePeriodSeconds"], "terminationGracePeriodSeconds")

    args = c["args"]
    parsed = parse_args(args, flags_known, "", "the binary")
    extra = [x for x in v.get("extraArgs") or []]
    fact(args[len(args) - len(extra):] == extra if extra else True, "extraArgs are not the last args")
    own = parsed[:len(parsed) - len(extra)]
    names = [n for n, _ in own]
    fact(len(names) == len(set(names)), f"a flag is given twice: {names}")
    got = dict(own)
    sa_user = f"system:serviceaccount:{ns}:{name}"
    fact(got.get("trusted-users", "").split(",") == [sa_user] + [u for u in v["trustedUsers"] if u != sa_user],
         f"--trusted-users {got.get('trusted-users')!r}")
    ctrl = f"system:serviceaccount:{v['agones']['namespace']}:{v['agones']['serviceAccounts']['controller']}"
    fact(got.get("agones-controller-users", "").split(",") == [ctrl] + v["agones"]["extraControllerUsers"],
         f"--agones-controller-users {got.get('agones-controller-users')!r}")
    fact(got.get("sdk-service-account") == v["agones"]["serviceAccounts"]["sdk"], "--sdk-service-account")
    fact(got.get("port") == str(v["ports"]["https"]) and got.get("health-port") == str(v["ports"]["health"]),
         "--port/--health-port do not follow ports")
    fact(("autoscale-buffer" in got) == bool(v["autoscale"]["buffer"]), "--autoscale-buffer does not follow autoscale.buffer")
    fact(got.get("tls-cert-file") == "/etc/allocating-webhook/tls/tls.crt", "--tls-cert-file")
    for k, val in v["flags"].items():
        if val is None or val == "":
            fact(k not in got, f"--{k} given although its value is empty")
        else:
            want = str(val).lower() if isinstance(val, bool) else str(val)
            fact(got.get(k) == want, f"--{k}={got.get(k)!r}, want {want!r}")

    # --- Webhook configurations --------------------------------------------------------------------
    mwc = one(objs, "MutatingWebhookConfiguration", name)
    vwc = one(objs, "ValidatingWebhookConfiguration", name)
    bm = base["MutatingWebhookConfiguration"][0]["webhooks"]
    bv = base["ValidatingWebhookConfiguration"][0]["webhooks"]
    if not v["webhooks"]["gameServerAllocations"]:
        bv = [w for w in bv if "gameserverallocations" not in w["name"]]
    want_ns = ["kube-system", ns] + [x for x in v["webhooks"]["excludeNamespaces"] if x not in ("kube-system", ns)]
    bundles = []
    for cfg, bhooks in ((mwc, bm), (vwc, bv)):
        hooks = cfg["webhooks"]
        fact([w["name"] for w in hooks] == [w["name"] for w in bhooks],
             f"{cfg['kind']} webhooks {[w['name'] for w in hooks]} != manifests/base's")
        for w, bw in zip(hooks, bhooks):
            for key in ("rules", "objectSelector", "matchPolicy", "sideEffects", "admissionReviewVersions",
                        "reinvocationPolicy", "matchConditions"):
                fact(w.get(key) == bw.get(key), f"{w['name']}: {key} {w.get(key)!r} != manifests/base {bw.get(key)!r}")
            fact(w["failurePolicy"] == v["webhooks"]["failurePolicy"], f"{w['name']}: failurePolicy {w['failurePolicy']}")
            fact(w["timeoutSeconds"] == v["webhooks"]["timeoutSeconds"], f"{w['name']}: timeoutSeconds")
            sel = w["namespaceSelector"]["matchExpressions"]
            fact(len(sel) == 1 and sel[0]["key"] == "kubernetes.io/metadata.name" and sel[0]["operator"] == "NotIn"
                 and sel[0]["values"] == want_ns, f"{w['name']}: namespaceSelector {sel}")
            cc, bcc = w["clientConfig"], bw["clientConfig"]
            path = bcc["service"]["path"]
            if v["webhooks"]["url"]:
                fact(cc.get("url") == v["webhooks"]["url"].rstrip("/") + path and "service" not in cc,
                     f"{w['name']}: clientConfig {cc}")
            else:
                fact(cc.get("service") == {"name": name, "namespace": ns, "path": path, "port": v["service"]["port"]}
                     and "url" not in cc, f"{w['name']}: clientConfig.service {cc.get('service')}")
            bundles.append(cc.get("caBundle"))
        ann = (cfg["metadata"].get("annotations") or {}).get("cert-manager.io/inject-ca-from")
        fact((ann == f"{ns}/{name}-serving") if v["certs"]["mode"] == "cert-manager" else ann is None,
             f"{cfg['kind']}: inject-ca-from {ann!r}")

    # --- Certificates --------------------------------------------------------------------------------
    mode = v["certs"]["mode"]
    dns = [f"{name}.{ns}.svc", f"{name}.{ns}.svc.cluster.local"] + v["certs"]["extraDNSNames"]
    if mode == "generate":
        sec = one(objs, "Secret", secret_name)
        if sec:
            fact(all(b == sec["data"]["ca.crt"] for b in bundles), "caBundle of some webhook != the generated Secret's ca.crt")
            verify_serving_pair(sec, dns, v["certs"]["extraIPs"], v["certs"]["generate"]["days"], "webhook")
        none_of(objs, "Certificate")
    elif mode == "cert-manager":
        fact(all(b is None for b in bundles), "caBundle set in cert-manager mode (cainjector owns it)")
        none_of(objs, "Secret")
        crt = one(objs, "Certificate", f"{name}-serving")
        if crt:
            fact(crt["spec"]["secretName"] == secret_name, "Certificate secretName")
            fact(crt["spec"]["dnsNames"] == dns, f"Certificate dnsNames {crt['spec']['dnsNames']}")
            ref = v["certs"]["certManager"]["issuerRef"]
            if ref:
                fact(crt["spec"]["issuerRef"] == ref, "Certificate issuerRef != certs.certManager.issuerRef")
                none_of(objs, "Issuer")
            else:
                fact(crt["spec"]["issuerRef"] == {"kind": "Issuer", "name": f"{name}-ca", "group": "cert-manager.io"},
                     "Certificate not issued by the chart's CA Issuer")
                ca_crt = one(objs, "Certificate", f"{name}-ca")
                fact(bool(ca_crt) and ca_crt["spec"]["isCA"] is True, "CA Certificate")
                one(objs, "Issuer", f"{name}-selfsigned")
                one(objs, "Issuer", f"{name}-ca")
    else:
        fact(all(b == v["certs"]["caBundle"] for b in bundles), "caBundle != certs.caBundle")
        none_of(objs, "Secret")
        none_of(objs, "Certificate")

    # --- RBAC, Service, PDB --------------------------------------------------------------------------
    brbac = {(d["kind"], d["metadata"]["name"]): d for d in base["ClusterRole"] + base.get("Role", [])}
    cr = one(objs, "ClusterRole", name)
    want_rules = copy.deepcopy(brbac[("ClusterRole", "allocating-webhook")]["rules"])
    if v["flags"].get("manage-crd") is False:
        for r in want_rules:
            if r["apiGroups"] == ["apiextensions.k8s.io"]:
                r["verbs"] = [x for x in r["verbs"] if x != "patch"]
    fact(cr and cr["rules"] == want_rules, "ClusterRole rules differ from manifests/base (manage-crd=false drops patch)")
    role = one(objs, "Role", f"{name}-leader-election")
    fact(role and role["rules"] == brbac[("Role", "allocating-webhook-leader-election")]["rules"],
         "leader-election Role rules differ from manifests/base")
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        b = [o for o in objs if o["kind"] == kind]
        fact(len(b) == 1 and b[0]["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
             f"{kind} subjects")
    one(objs, "ServiceAccount", name)
    svc = one(objs, "Service", name)
    fact(svc and svc["spec"]["ports"] == [{"name": "https", "port": v["service"]["port"], "targetPort": "https", "protocol": "TCP"}]
         and svc["spec"]["selector"] == {"app.kubernetes.io/name": name}, "Service")
    if v["podDisruptionBudget"]["enabled"]:
        pdb = one(objs, "PodDisruptionBudget", name)
        fact(pdb and pdb["spec"]["minAvailable"] == v["podDisruptionBudget"]["minAvailable"], "PDB minAvailable")
    else:
        none_of(objs, "PodDisruptionBudget")

    # --- Monitoring, NetworkPolicy, Namespace --------------------------------------------------------
    mon = v["monitoring"]
    if mon["podMonitor"]["enabled"]:
        pm = one(objs, "PodMonitor", name)
        bpm = load_docs(os.path.join(ROOT, "manifests", "monitoring", "podmonitor.yaml"))[0]
        fact(pm and pm["spec"]["podMetricsEndpoints"][0]["port"] == "health"
             and pm["spec"]["selector"] == bpm["spec"]["selector"] and pm["spec"]["jobLabel"] == bpm["spec"]["jobLabel"],
             "PodMonitor differs from manifests/monitoring")
        for k, val in mon["podMonitor"]["labels"].items():
            fact(pm and pm["metadata"]["labels"].get(k) == val, f"PodMonitor label {k}")
    else:
        none_of(objs, "PodMonitor")
    if mon["serviceMonitor"]["enabled"]:
        sm = one(objs, "ServiceMonitor", name)
        ms = one(objs, "Service", f"{name}-metrics")
        fact(sm and ms and all(ms["metadata"]["labels"].get(k) == val for k, val in sm["spec"]["selector"]["matchLabels"].items()),
             "ServiceMonitor does not select the metrics Service")
        fact(ms and ms["spec"]["ports"][0]["targetPort"] == "health", "metrics Service port")
    else:
        none_of(objs, "ServiceMonitor")
    if mon["prometheusRule"]["enabled"]:
        pr = one(objs, "PrometheusRule", name)
        bpr = load_docs(os.path.join(ROOT, "manifests", "monitoring", "prometheusrule.yaml"))[0]
        fact(pr and pr["spec"] == bpr["spec"], "PrometheusRule spec differs from manifests/monitoring/prometheusrule.yaml")
    else:
        none_of(objs, "PrometheusRule")
    if mon["grafanaDashboard"]["enabled"]:
        cm = one(objs, "ConfigMap", f"{name}-dashboard")
        with open(os.path.join(ROOT, "manifests", "monitoring", "grafana-dashboard.json")) as f:
            want = json.load(f)
        try:
            got = json.loads(cm["data"]["grafana-dashboard.json"]) if cm else None
        except (KeyError, ValueError) as e:
            got = f"unparsable: {e}"
        fact(got == want, "dashboard ConfigMap differs from manifests/monitoring/grafana-dashboard.json")
        for k, val in mon["grafanaDashboard"]["labels"].items():
            fact(cm and cm["metadata"]["labels"].get(k) == val, f"dashboard ConfigMap label {k}")
    else:
        none_of(objs, "ConfigMap")
    if v["networkPolicy"]["enabled"]:
        np = one(objs, "NetworkPolicy", name)
        fact(np and np["spec"]["ingress"][0]["from"] == [{"ipBlock": {"cidr": v["networkPolicy"]["apiServerCIDR"]}}],
             "NetworkPolicy admission source")
    else:
        none_of(objs, "NetworkPolicy")
    if v["namespace"]["create"]:
        nso = one(objs, "Namespace", ns)
        fact(nso and all(nso["metadata"]["labels"].get(k) == val for k, val in base["Namespace"][0]["metadata"]["labels"].items()),
             "Namespace lacks the labels of manifests/base (Pod Security restricted)")
    else:
        none_of(objs, "Namespace")

    known = {"Deployment", "Service", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
             "PodDisruptionBudget", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Secret",
             "Certificate", "Issuer", "PodMonitor", "ServiceMonitor", "PrometheusRule", "NetworkPolicy", "Namespace",
             "ConfigMap"}
    for o in objs:
        fact(o["kind"] in known, f"unexpected object {o['kind']} {o['metadata']['name']}")

    check_gateway(gw_objs, v, ns, gateway_help, dep, objs)

    for f in failures:
        print(f"check-render: {os.path.basename(values_file)}: {f}")
    if failures:
        return 1
    print(f"check-render: {os.path.basename(values_file)}: {checked} facts hold")
    return 0


def verify_serving_pair(sec, dns, ips, days, what):
    """The kubernetes.io/tls Secret sec holds a CA and a serving certificate signed by it, for dns/ips, valid
    for about `days` days."""
    fact(sec["type"] == "kubernetes.io/tls", f"{what}: Secret type")
    with tempfile.TemporaryDirectory() as tmp:
        for k, fn in (("ca.crt", "ca.pem"), ("tls.crt", "leaf.pem")):
            with open(os.path.join(tmp, fn), "wb") as f:
                f.write(base64.b64decode(sec["data"][k]))
        ca, leaf = os.path.join(tmp, "ca.pem"), os.path.join(tmp, "leaf.pem")
        ok = subprocess.run(["openssl", "verify", "-purpose", "sslserver", "-CAfile", ca, leaf],
                            capture_output=True, text=True)
        fact(ok.returncode == 0, f"{what}: serving certificate does not verify against its ca.crt: {ok.stdout}{ok.stderr}")
        fact("CA:TRUE" in openssl_text(ca), f"{what}: the ca.crt certificate is not a CA")
        leaf_text = openssl_text(leaf)
        san = re.search(r"X509v3 Subject Alternative Name:.*?\n\s*(.*?)\n", leaf_text, re.S)
        entries = [e.strip() for e in san.group(1).split(",")] if san else []
        got_dns = {e[4:] for e in entries if e.startswith("DNS:")}
        got_ips = {e[11:] for e in entries if e.startswith("IP Address:")}
        fact(got_dns >= set(dns), f"{what}: SAN DNS {sorted(got_dns)} lacks some of {dns}")
        want_ips = {str(ipaddress.ip_address(i)) for i in ips}
        fact(got_ips >= want_ips, f"{what}: SAN IPs {sorted(got_ips)} lack some of {sorted(want_ips)}")
        end = subprocess.run(["openssl", "x509", "-noout", "-checkend", str((days - 2) * 86400), "-in", leaf],
                             capture_output=True, text=True)
        fact(end.returncode == 0, f"{what}: serving certificate lifetime shorter than certs.generate.days")
    fact(b"PRIVATE KEY" in base64.b64decode(sec["data"]["tls.key"]), f"{what}: tls.key is not a PEM private key")


def check_gateway(objs, v, ns, help_file, webhook_dep, webhook_objs):
    """The gateway's objects (gateway.enabled) against manifests/components/gateway and its --help."""
    g = v["gateway"]
    gw = g["name"]
    if not g["enabled"]:
        fact(not objs, f"gateway disabled but rendered {[o['kind'] + ' ' + o['metadata']['name'] for o in objs]}")
        return
    if not fact(help_file is not None, "gateway enabled: check-render needs allocation-gateway --help (5th argument)"):
        return
    gw_flags = help_flags(help_file)
    comp = {}
    cdir = os.path.join(ROOT, "manifests", "components", "gateway")
    for fn in os.listdir(cdir):
        if fn.endswith(".yaml") and fn != "kustomization.yaml":
            for d in load_docs(os.path.join(cdir, fn)):
                comp[d["kind"]] = d
    for o in objs:
        md = o["metadata"]
        if o["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            fact("namespace" not in md, f"gateway {o['kind']} has a namespace")
        else:
            fact(md.get("namespace") == ns, f"gateway {o['kind']} {md['name']} namespace {md.get('namespace')!r}")
    fact(set(g["flags"]) | GATEWAY_CHART_FLAGS == gw_flags,
         f"gateway.flags + chart-set flags != allocation-gateway --help: missing "
         f"{sorted(gw_flags - set(g['flags']) - GATEWAY_CHART_FLAGS)}, unknown {sorted((set(g['flags']) | GATEWAY_CHART_FLAGS) - gw_flags)}")

    cr = one(objs, "ClusterRole", gw)
    fact(cr and cr["rules"] == comp["ClusterRole"]["rules"], "gateway ClusterRole rules differ from manifests/components/gateway")
    crb = one(objs, "ClusterRoleBinding", gw)
    fact(crb and crb["subjects"] == [{"kind": "ServiceAccount", "name": gw, "namespace": ns}]
         and crb["roleRef"]["name"] == gw, "gateway ClusterRoleBinding")
    one(objs, "ServiceAccount", gw)
    svc = one(objs, "Service", gw)
    fact(svc and svc["spec"]["selector"] == {"app.kubernetes.io/name": gw}
         and svc["spec"]["ports"] == [{"name": "https", "port": g["service"]["port"], "targetPort": "https", "protocol": "TCP"}],
         "gateway Service")
    if g["podDisruptionBudget"]["enabled"]:
        pdb = one(objs, "PodDisruptionBudget", gw)
        fact(pdb and pdb["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": gw}
             and pdb["spec"]["minAvailable"] == g["podDisruptionBudget"]["minAvailable"], "gateway PDB")

    dep = one(objs, "Deployment", gw)
    if not dep:
        return
    pod, wpod = dep["spec"]["template"]["spec"], webhook_dep["spec"]["template"]["spec"]
    c, wc = pod["containers"][0], wpod["containers"][0]
    cc = comp["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    fact(dep["spec"]["replicas"] == g["replicas"], "gateway replicas")
    fact(dep["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": gw}, "gateway Deployment selector")
    fact(pod["serviceAccountName"] == gw, "gateway serviceAccountName")
    fact(c.get("command") == ["/usr/local/bin/allocation-gateway"], f"gateway command {c.get('command')}")
    fact(c["image"] == wc["image"], "gateway image differs from the webhook's (one image, two binaries)")
    fact(pod["securityContext"] == wpod["securityContext"], "gateway pod securityContext differs from the webhook's")
    fact(c["securityContext"] == wc["securityContext"], "gateway container securityContext differs from the webhook's")
    fact(c["securityContext"].get("readOnlyRootFilesystem") is True, "gateway root file system is not read-only")
    for key in ("livenessProbe", "readinessProbe"):
        fact(c.get(key) == cc.get(key), f"gateway {key} differs from manifests/components/gateway")
    fact(pod["terminationGracePeriodSeconds"] == g["terminationGracePeriodSeconds"], "gateway terminationGracePeriodSeconds")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    fact(ports == {"https": g["ports"]["https"], "health": g["ports"]["health"]}, f"gateway container ports {ports}")

    args = c["args"]
    parsed = parse_args(args, gw_flags, "gateway ", "allocation-gateway")
    extra = list(g.get("extraArgs") or [])
    own = parsed[:len(parsed) - len(extra)]
    got = dict(own)
    fact(len(got) == len(own), f"gateway: a flag is given twice: {[n for n, _ in own]}")
    fact(got.get("port") == str(g["ports"]["https"]) and got.get("health-port") == str(g["ports"]["health"]),
         "gateway --port/--health-port do not follow gateway.ports")
    fact(got.get("allocator-address") == g["allocator"]["address"], "gateway --allocator-address")
    fact(("disable-mtls" in got) == bool(g["disableMTLS"]) and ("client-ca-dir" in got) != bool(g["disableMTLS"]),
         "gateway --disable-mtls / --client-ca-dir do not follow gateway.disableMTLS")
    fact("client-ca-file" not in got, "gateway --client-ca-file given: the chart mounts a directory (--client-ca-dir)")
    tls_upstream = g["allocator"]["address"].startswith("https://")
    fact(all((k in got) == tls_upstream for k in ("allocator-client-cert-file", "allocator-client-key-file",
                                                    "allocator-ca-file")),
         "gateway --allocator-*-file flags must be given exactly when the allocator address is https://")
    for k, val in g["flags"].items():
        if val is None or val == "":
            fact(k not in got, f"gateway --{k} given although its value is empty")
        else:
            want = str(val).lower() if isinstance(val, bool) else str(val)
            fact(got.get(k) == want, f"gateway --{k}={got.get(k)!r}, want {want!r}")
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    for k, val in got.items():
        if k.endswith("-file") or k.endswith("-dir"):
            fact(any(val == p or val.startswith(p + "/") for p in mounts), f"gateway --{k}={val} is on no mounted volume")
    vols = {x["name"]: x.get("secret", {}).get("secretName") for x in pod["volumes"]}
    want_vols = {"tls": g["certs"].get("secretName") or f"{gw}-tls", "tmp": None}
    if tls_upstream:
        want_vols["allocator"] = g["allocator"]["clientSecret"]
    if not g["disableMTLS"]:
        want_vols["client-ca"] = g["clientCASecret"]
    fact(vols == want_vols, f"gateway volumes {vols}, want {want_vols}")

    mode = v["certs"]["mode"]
    dns = [f"{gw}.{ns}.svc", f"{gw}.{ns}.svc.cluster.local"] + g["certs"]["extraDNSNames"]
    secret_name = g["certs"].get("secretName") or f"{gw}-tls"
    if mode == "generate":
        sec = one(objs, "Secret", secret_name)
        if sec:
            verify_serving_pair(sec, dns, g["certs"]["extraIPs"], v["certs"]["generate"]["days"], "gateway")
        fact(not [o for o in objs if o["kind"] == "Certificate"], "gateway Certificate in generate mode")
    elif mode == "cert-manager":
        crt = one(objs, "Certificate", f"{gw}-serving")
        wcrt = [o for o in webhook_objs if o["kind"] == "Certificate" and o["metadata"]["name"].endswith("-serving")]
        fact(crt and crt["spec"]["secretName"] == secret_name and crt["spec"]["dnsNames"] == dns,
             "gateway Certificate secretName/dnsNames")
        fact(crt and wcrt and crt["spec"]["issuerRef"] == wcrt[0]["spec"]["issuerRef"],
             "gateway Certificate not issued like the webhook's")
        fact(not [o for o in objs if o["kind"] == "Secret"], "gateway Secret in cert-manager mode")
    else:
        fact(not [o for o in objs if o["kind"] in ("Secret", "Certificate")], "gateway Secret/Certificate in secret mode")


if __name__ == "__main__":
    sys.exit(main())
