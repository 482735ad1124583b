# bash closes each pipe end twice after a pipeline. With its heap mostly remote (a 20,000-element
# array over a DRAM limit of 2M) the runtime's threads work while 40 command substitutions and
# pipelines run: every substitution must come back whole and every sed must read its own pipe
# (docs/results/NOTES.md, "a program's double close met the runtime's descriptors").
declare -a big
for i in $(seq 1 20000); do big[$i]="value number $i with some padding to make it longer"; done
for i in $(seq 1 40); do
  t=$(seq 1 3 | readlink /proc/self/fd/0)
  echo "$i ${t%%:*} $(seq 1 50 | sed "s/^/l $i /" | cksum)"
done
echo "${#big[@]} ${big[20000]}"
