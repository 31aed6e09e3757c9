#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Checks Kubernetes manifests against the API's own schema, offline: every
field of every object must be one its type has (a typo fails), of the type
the API gives it, with every required field present.  The types come from
the Kubernetes Python client (Debian's python3-kubernetes, generated from the
API's OpenAPI definitions: each model's attribute_map, openapi_types and
required setters).  Then what the API server or the kubelet would refuse
although each field is well typed:

- names (metadata, containers, volumes, ports) as Kubernetes spells them;
- a workload's selector matching its pod template's labels;
- every volumeMount naming a volume of the pod, mounted once per path;
- probes' named ports declared by their container;
- ConfigMaps that volumes use: given in the files (unless optional), with
  the keys a volume's items name (Secrets are made by hand: not checked);
- images named as deploy/image/build.sh tags them (snowid/NAME:VERSION,
  VERSION from debian/changelog).

    check-manifests.py [--self-test] FILE...

--self-test also breaks a copy of the files in ways each check must catch,
and fails unless every one is caught.  Prints one line per object or
problem; exit 0 when every file is sound.
"""
import copy
import os
import re
import sys

try:
    import yaml
except ImportError:
    print("check-manifests.py: needs python3-yaml")
    sys.exit(77)
try:
    from kubernetes import client as k8s
except ImportError:
    # 77: meson's "skipped"
    print("check-manifests.py: needs python3-kubernetes (Debian's package, under /usr/bin/python3; "
          "scripts/deps.sh --test installs it)")
    sys.exit(77)

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_required = {}


def model(name):
    return getattr(k8s, name, None)


def required_fields(cls):
    """The attributes whose setter refuses None (the API's required fields)."""
    if cls not in _required:
        conf = k8s.Configuration()
        conf.client_side_validation = True
        obj = cls.__new__(cls)
        obj.local_vars_configuration = conf
        req = set()
        for attr in cls.openapi_types:
            try:
                setattr(obj, attr, None)
            except ValueError:
                req.add(attr)
        _required[cls] = req
    return _required[cls]


def walk(value, typ, path, problems):
    """value (from YAML) against the client's type string typ."""
    if typ == "object":  # IntOrString, RawExtension and the like: anything
        return
    if typ.startswith("list["):
        if not isinstance(value, list):
            problems.append("%s: a list expected, not %r" % (path, value))
            return
        for i, v in enumerate(value):
            walk(v, typ[5:-1], "%s[%d]" % (path, i), problems)
        return
    if typ.startswith("dict("):
        inner = typ[5:-1].split(",", 1)[1].strip()
        if not isinstance(value, dict):
            problems.append("%s: a map expected, not %r" % (path, value))
            return
        for k, v in value.items():
            if not isinstance(k, str):
                problems.append("%s: key %r is not a string" % (path, k))
            walk(v, inner, "%s.%s" % (path, k), problems)
        return
    scalar = {"str": str, "int": int, "bool": bool, "float": (int, float), "datetime": str,
              "date": str}
    if typ in scalar:
        ok = isinstance(value, scalar[typ]) and not (typ in ("int", "float") and isinstance(value, bool))
        if not ok:
            problems.append("%s: %s expected, not %r" % (path, typ, value))
        return
    cls = model(typ)
    if cls is None:
        problems.append("%s: no type %s in the client" % (path, typ))
        return
    if not isinstance(value, dict):
        problems.append("%s: an object (%s) expected, not %r" % (path, typ, value))
        return
    by_json = {j: a for a, j in cls.attribute_map.items()}
    for k, v in value.items():
        attr = by_json.get(k)
        if attr is None:
            problems.append("%s.%s: no such field in %s" % (path, k, typ))
            continue
        if v is None:
            continue
        walk(v, cls.openapi_types[attr], "%s.%s" % (path, k), problems)
    for attr in required_fields(cls):
        if cls.attribute_map[attr] not in value:
            problems.append("%s: %s requires %s" % (path, typ, cls.attribute_map[attr]))


def served(doc):
    """Whether the API group and version of doc serve its kind: the client's
    API class for the group has a create call for it."""
    api, kind = doc.get("apiVersion", ""), doc.get("kind", "")
    group, _, version = api.rpartition("/")
    group = group.replace(".k8s.io", "") if group else "core"
    cls = getattr(k8s, "%s%sApi" % ("".join(w[:1].upper() + w[1:] for w in group.split(".")),
                                     version[:1].upper() + version[1:]), None)
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()
    return cls is not None and any(hasattr(cls, "create_%s%s" % (scope, snake))
                                   for scope in ("namespaced_", ""))


def kind_model(doc):
    api, kind = doc.get("apiVersion", ""), doc.get("kind", "")
    version = api.rsplit("/", 1)[-1]
    return "%s%s" % (version[:1].upper() + version[1:], kind)


def check_pod(spec, path, where, problems):
    volumes = {}
    for i, v in enumerate(spec.get("volumes", [])):
        name = v.get("name", "")
        if not DNS_LABEL.match(name):
            problems.append("%s.volumes[%d].name: %r is not a DNS label" % (path, i, name))
        if name in volumes:
            problems.append("%s.volumes: %r twice" % (path, name))
        volumes[name] = v
        cm = v.get("configMap")
        if cm and cm.get("name") not in where["configmaps"]:
            if not cm.get("optional"):
                problems.append("%s.volumes[%d]: ConfigMap %r is in none of the files"
                                % (path, i, cm.get("name")))
        elif cm:
            data = where["configmaps"][cm["name"]]
            for item in cm.get("items", []):
                if item.get("key") not in data:
                    problems.append("%s.volumes[%d]: ConfigMap %r has no key %r"
                                    % (path, i, cm["name"], item.get("key")))
    names = set()
    for group in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(group, [])):
            cpath = "%s.%s[%d]" % (path, group, i)
            name = c.get("name", "")
            if not DNS_LABEL.match(name):
                problems.append("%s.name: %r is not a DNS label" % (cpath, name))
            if name in names:
                problems.append("%s.name: %r twice in the pod" % (cpath, name))
            names.add(name)
            image = c.get("image", "")
            if image.startswith("snowid/") and image not in where["images"]:
                problems.append("%s.image: %r is not an image deploy/image/build.sh makes (%s)"
                                % (cpath, image, ", ".join(sorted(where["images"]))))
            ports = {p.get("name") for p in c.get("ports", []) if p.get("name")}
            for p in c.get("ports", []):
                if "name" in p and not re.match(r"^[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?$", p["name"]):
                    problems.append("%s.ports: %r is not a port name" % (cpath, p["name"]))
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                port = c.get(probe, {}).get("httpGet", {}).get("port")
                if isinstance(port, str) and port not in ports:
                    problems.append("%s.%s: port %r is none of the container's" % (cpath, probe, port))
            paths = set()
            for m in c.get("volumeMounts", []):
                if m.get("name") not in volumes:
                    problems.append("%s.volumeMounts: %r is no volume of the pod" % (cpath, m.get("name")))
                if m.get("mountPath") in paths:
                    problems.append("%s.volumeMounts: %r mounted twice" % (cpath, m.get("mountPath")))
                paths.add(m.get("mountPath"))


def check_doc(doc, where, problems):
    path = "%s/%s" % (doc.get("kind"), doc.get("metadata", {}).get("name"))
    name = kind_model(doc)
    cls = model(name)
    if cls is None or not served(doc):
        problems.append("%s: no kind %s in apiVersion %s" % (path, doc.get("kind"), doc.get("apiVersion")))
        return
    walk(doc, name, path, problems)
    meta = doc.get("metadata", {})
    if not DNS_SUBDOMAIN.match(meta.get("name", "")):
        problems.append("%s.metadata.name: %r is not a DNS subdomain" % (path, meta.get("name")))
    spec = doc.get("spec", {})
    if doc.get("kind") in ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet"):
        match = spec.get("selector", {}).get("matchLabels", {})
        labels = spec.get("template", {}).get("metadata", {}).get("labels", {})
        if not match or any(labels.get(k) != v for k, v in match.items()):
            problems.append("%s.spec.selector: %r does not match the template's labels %r"
                            % (path, match, labels))
        check_pod(spec.get("template", {}).get("spec", {}), path + ".spec.template.spec", where, problems)
    elif doc.get("kind") == "Pod":
        check_pod(spec, path + ".spec", where, problems)


def images():
    version = "0.1.0"
    with open(os.path.join(SRC, "debian", "changelog")) as f:
        m = re.match(r"^\S+ \(([^)-]+)", f.readline())
        if m:
            version = m.group(1)
    return {"snowid/snowidd:" + version, "snowid/snowid:" + version}


def check_files(files):
    """{file: [problems]} for a {file: [docs]}."""
    where = {"configmaps": {}, "images": images()}
    for docs in files.values():
        for d in docs:
            if d.get("kind") == "ConfigMap":
                where["configmaps"][d["metadata"]["name"]] = d.get("data", {})
    out = {}
    for f, docs in files.items():
        problems = []
        for d in docs:
            if not isinstance(d, dict):
                problems.append("a document that is not an object: %r" % (d,))
                continue
            check_doc(d, where, problems)
        out[f] = problems
    return out


def breakages(files):
    """(what, broken copy of files) for each way a manifest can go wrong."""
    def first(fs, kind):
        for docs in fs.values():
            for d in docs:
                if d.get("kind") == kind:
                    return d

    def pod_of(fs):
        return first(fs, "DaemonSet")["spec"]["template"]["spec"]

    def b(what, change):
        fs = copy.deepcopy(files)
        change(fs)
        return what, fs
    return [
        b("a misspelt field", lambda fs: pod_of(fs)["containers"][0].update(imagePullPolcy="Always")),
        b("a field at the wrong level", lambda fs: first(fs, "DaemonSet")["spec"].update(
            hostNetwork=False)),
        b("a number as a string", lambda fs: first(fs, "Deployment")["spec"].update(replicas="2")),
        b("a list as a map", lambda fs: pod_of(fs).update(tolerations={"operator": "Exists"})),
        b("a missing required field", lambda fs: pod_of(fs)["containers"][0].pop("name")),
        b("a kind the API version lacks", lambda fs: first(fs, "NetworkPolicy").update(
            apiVersion="apps/v1")),
        b("a selector the template does not match", lambda fs: first(fs, "DaemonSet")["spec"][
            "selector"]["matchLabels"].update({"app.kubernetes.io/name": "snowid"})),
        b("a mount of no volume", lambda fs: pod_of(fs)["containers"][0]["volumeMounts"][0].update(
            name="runtime")),
        b("a probe on an undeclared port", lambda fs: pod_of(fs)["containers"][0][
            "readinessProbe"]["httpGet"].update(port="metrics")),
        b("a ConfigMap in none of the files", lambda fs: [v["configMap"].update(name="snowid-config")
                                                        for v in pod_of(fs)["volumes"] if "configMap" in v]),
        b("an image build.sh does not make", lambda fs: pod_of(fs)["containers"][0].update(
            image="snowid/snowidd:0.0.9")),
        b("a name with capitals", lambda fs: first(fs, "ConfigMap")["metadata"].update(name="Snowidd")),
    ]


def main(argv):
    self_test = "--self-test" in argv
    paths = [a for a in argv if a != "--self-test"]
    if not paths:
        sys.exit(__doc__)
    files = {}
    for p in paths:
        with open(p) as f:
            files[os.path.basename(p)] = [d for d in yaml.safe_load_all(f) if d is not None]
    bad = 0
    for f, problems in check_files(files).items():
        kinds = ", ".join("%s/%s" % (d.get("kind"), d.get("metadata", {}).get("name")) for d in files[f])
        print("%s: %s" % (f, "sound (%s)" % kinds if not problems else "%d problem(s)" % len(problems)))
        for p in problems:
            print("  " + p)
        bad += len(problems)
    if self_test:
        for what, broken in breakages(files):
            found = [p for ps in check_files(broken).values() for p in ps]
            print("%s: %s" % (what, "caught: " + found[0] if found else "NOT CAUGHT"))
            bad += 0 if found else 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
