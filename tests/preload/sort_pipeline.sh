# A shell pipeline over a generated file of 1.5M lines: awk, sort, uniq, sort again.
awk 'BEGIN { for (i = 0; i < 1500000; i++) printf "%08d %s\n", (i * 7919) % 1000003, substr("abcdefghijklmnopqrstuvwxyz", i % 26 + 1, i % 11 + 1) }' > big.txt
sort -k2,2 -k1,1n big.txt | uniq -c -f1 | sort -rn | head -40
sort -u big.txt | md5sum
wc -l big.txt
