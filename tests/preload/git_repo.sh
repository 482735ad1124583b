# A repository of 300 files in 10 commits, then its log: deterministic ids from fixed names/dates.
set -e
export GIT_AUTHOR_NAME=Tier GIT_AUTHOR_EMAIL=tier@example.com GIT_COMMITTER_NAME=Tier
export GIT_COMMITTER_EMAIL=tier@example.com HOME=$PWD GIT_CONFIG_NOSYSTEM=1
git init -q -b main repo
cd repo
for c in $(seq 1 10); do
  for f in $(seq 1 30); do
    n=$(( (c - 1) * 30 + f ))
    mkdir -p "d$(( n % 7 ))"
    seq 1 $(( n * 3 )) | sed "s/^/line $c $n /" > "d$(( n % 7 ))/file$n.txt"
  done
  git add -A
  GIT_AUTHOR_DATE="2024-01-$(printf %02d $c)T12:00:00Z" GIT_COMMITTER_DATE="2024-01-$(printf %02d $c)T12:00:00Z" \
    git commit -q -m "commit $c"
done
git gc -q
git log --stat --format='%H %an %ad %s' --date=iso-strict
git ls-files | wc -l
git rev-parse HEAD^{tree}
