{
  "targets": [
    {
      "target_name": "snowid",
      "sources": ["src/snowid_node.c"],
      "cflags": ["-std=gnu11", "<!@(pkg-config --cflags snowid)"],
      "libraries": ["<!@(pkg-config --libs snowid)"],
      "ldflags": ["-Wl,-rpath,<!(pkg-config --variable=libdir snowid)"]
    }
  ]
}
