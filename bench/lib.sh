# bench/lib.sh: what the bench/*.sh scripts share (sourced).

# MEDIAN_AWK: the start of an awk program that reads "name value" lines
# into v[name, 1..n[name]] and defines median(name); the caller appends its
# END block.
MEDIAN_AWK='
  { v[$1, ++n[$1]] = $2 }
  function median(name,   k, i, j, t, a) {
    k = n[name]; for (i = 1; i <= k; i++) a[i] = v[name, i]
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }'
